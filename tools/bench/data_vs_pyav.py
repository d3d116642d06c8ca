#!/usr/bin/python3
"""vexp's loader vs a PyAV + NumPy baseline on the same files and the same 8 TSN frames.

Generates N 340x256 H.264 clips (10 s at 25 fps, keyframe every 250 frames) with the
ffmpeg CLI, then measures, on one core each:
  * baseline: PyAV opens each file, seeks to the keyframe before the first TSN
    test frame (segment centres), decodes forward, converts the 8 wanted frames to
    RGB NumPy arrays and stacks them (no crop, no normalisation: less work than vexp);
  * vexp: `vexp bench data` on a recipe over the same list (test sampling, centre
    crop 224, normalise to float), with 1 loader thread, then with every core.
Prints clips/s of each and the per-core ratio.  Usage:
  tools/bench/data_vs_pyav.py [--vexp build/bin/vexp] [--clips 24] [--work DIR]
"""
import argparse, json, os, subprocess, sys, tempfile, time

import av
import numpy as np


def make_clips(work, n):
    root = os.path.join(work, "clips")
    os.makedirs(root, exist_ok=True)
    lines = []
    for i in range(n):
        path = os.path.join(root, f"c{i:03d}.mp4")
        if not os.path.exists(path):
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                            f"testsrc2=size=340x256:rate=25,noise=alls=12:allf=t",
                            "-ss", str(i % 7), "-t", "10", "-c:v", "libx264", "-preset", "medium",
                            "-pix_fmt", "yuv420p", "-g", "250", "-keyint_min", "250", "-sc_threshold", "0",
                            path], check=True)
        lines.append(f"clips/c{i:03d}.mp4 {i % 4}")
    with open(os.path.join(work, "list.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return [os.path.join(work, l.split()[0]) for l in lines]


def tsn_centres(nf, t=8):
    tick = nf / t
    return [int(tick / 2 + tick * i) for i in range(t)]


def pyav_clip(path):
    with av.open(path) as c:
        s = c.streams.video[0]
        # Frame count from the packets (what vexp does), pts per frame in order.
        pts = sorted(p.pts for p in c.demux(s) if p.pts is not None)
        want = {pts[i] for i in tsn_centres(len(pts))}
        c.seek(min(want), stream=s, backward=True, any_frame=False)
        out = {}
        for frame in c.decode(s):
            if frame.pts in want:
                out[frame.pts] = frame.to_ndarray(format="rgb24")
                if len(out) == len(want):
                    break
        return np.stack([out[p] for p in sorted(want)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vexp", default=os.path.join(os.path.dirname(__file__), "../../build/bin/vexp"))
    ap.add_argument("--clips", type=int, default=24)
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="vexp_bench_data_")
    files = make_clips(work, a.clips)
    recipe = os.path.join(work, "bench.toml")
    with open(recipe, "w") as f:
        f.write(f"""[run]
name = "bench_data"
[data]
dataset = "kinetics"
[data.params]
root = "{work}"
train_list = "list.txt"
val_list = "list.txt"
classes = 4
frames = 8
[dist]
batch_per_gpu = 1
[model]
input = "clip"
output = "logits"
[[model.node]]
id = "frames"
op = "fold_time"
in = "clip"
[[model.node]]
id = "head"
op = "classifier"
in = "frames"
[[model.node]]
id = "logits"
op = "segment_consensus"
in = "head"
""")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    pyav_clip(files[0])  # warm up
    t0 = time.perf_counter()
    for p in files:
        clip = pyav_clip(p)
        assert clip.shape == (8, 256, 340, 3), clip.shape
    base = len(files) / (time.perf_counter() - t0)
    cores = os.cpu_count() or 1
    threads = "1" if cores == 1 else f"1,{cores}"
    out = subprocess.run([a.vexp, "bench", "data", recipe, "--threads", threads, "--json", "--repeat", "2"],
                         check=True, capture_output=True, text=True).stdout
    res = json.loads(out)["results"]
    print(f"{len(files)} clips of 340x256 H.264, 250 frames, keyframe every 250 frames; 8 TSN test frames each")
    print(f"PyAV + NumPy (1 core):        {base:7.1f} clips/s")
    for r in res:
        print(f"vexp bench data ({r['threads']} thread{'s' if r['threads'] > 1 else ''}): {r['clips_per_s']:7.1f} clips/s"
              f" = {r['clips_per_s_per_thread']:.1f} per thread")
    print(f"ratio per core (vexp 1 thread / PyAV): {res[0]['clips_per_s'] / base:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
