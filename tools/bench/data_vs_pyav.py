#!/usr/bin/python3
"""vexp's loader vs a PyAV + NumPy baseline on the same files and the same 8 TSN frames.

Generates N 340x256 H.264 clips (10 s at 25 fps, keyframe every 250 frames) with the
ffmpeg CLI, then measures, on one core each:
  * baseline: PyAV opens each file, seeks to the keyframe before the first TSN
    test frame (segment centres), decodes forward with one decoding thread,
    converts the 8 wanted frames to RGB NumPy arrays and stacks them (no crop, no
    normalisation: less work than vexp);
  * vexp: `vexp bench data` on a recipe over the same list (test sampling, centre
    crop 224, normalise to float) with 1 loader thread (1 decoding thread), then
    with every core.
The two alternate for --rounds rounds, so both see the same machine load. Both
are timed by the wall clock and by the CPU time of their process (user + system,
all threads): on a shared machine clips per CPU second is the per-core figure
that load does not distort. Prints clips/s of each, the per-core ratios, the
frames each decoded per clip, and the load average.  Usage:
  tools/bench/data_vs_pyav.py [--vexp build/bin/vexp] [--clips 24] [--rounds 3] [--work DIR]
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


def pyav_clip(path, counts=None):
    with av.open(path) as c:
        s = c.streams.video[0]
        # One decoding thread, as vexp uses per loader thread (PyAV's default is
        # slice threading on every core).
        s.thread_type = "NONE"
        s.thread_count = 1
        # Frame count from the packets (what vexp does), pts per frame in order.
        pts = sorted(p.pts for p in c.demux(s) if p.pts is not None)
        want = {pts[i] for i in tsn_centres(len(pts))}
        c.seek(min(want), stream=s, backward=True, any_frame=False)
        out = {}
        for frame in c.decode(s):
            if counts is not None:
                counts.append(1)
            if frame.pts in want:
                out[frame.pts] = frame.to_ndarray(format="rgb24")
                if len(out) == len(want):
                    break
        return np.stack([out[p] for p in sorted(want)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vexp", default=os.path.join(os.path.dirname(__file__), "../../build/bin/vexp"))
    ap.add_argument("--clips", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=3)
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
    cores = os.cpu_count() or 1

    def baseline():
        counts = []
        w0, c0 = time.perf_counter(), time.process_time()
        for p in files:
            clip = pyav_clip(p, counts)
            assert clip.shape == (8, 256, 340, 3), clip.shape
        return len(files) / (time.perf_counter() - w0), len(files) / (time.process_time() - c0), len(counts) / len(files)

    def vexp(threads):
        out = subprocess.run([a.vexp, "bench", "data", recipe, "--threads", str(threads), "--json"],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)["results"][0]
        return r["clips_per_s"], r["clips_per_cpu_s"]

    pyav_clip(files[0])  # warm up (and the page cache)
    vexp(1)
    rows = []
    for r in range(a.rounds):
        bw, bc, frames = baseline()
        vw, vc = vexp(1)
        rows.append((bw, bc, vw, vc))
        print(f"round {r + 1}: PyAV {bw:.2f} clips/s ({bc:.2f} per CPU s), vexp 1 thread {vw:.2f} clips/s "
              f"({vc:.2f} per CPU s); wall ratio {vw / bw:.2f}x, CPU ratio {vc / bc:.2f}x; load {os.getloadavg()[0]:.2f}")
    med = lambda xs: sorted(xs)[len(xs) // 2]
    bw, bc, vw, vc = (med([row[i] for row in rows]) for i in range(4))
    print(f"{len(files)} clips of 340x256 H.264, 250 frames, keyframe every 250 frames; 8 TSN test frames each")
    print(f"PyAV + NumPy (1 thread):       {bw:7.2f} clips/s, {bc:7.2f} per CPU second; decodes {frames:.0f} frames/clip")
    print(f"vexp bench data (1 thread):    {vw:7.2f} clips/s, {vc:7.2f} per CPU second")
    if cores > 1:
        aw, ac = vexp(cores)
        print(f"vexp bench data ({cores} threads):   {aw:7.2f} clips/s = {aw / cores:.2f} per thread, {ac:.2f} per CPU second")
    rc, rw = med([row[3] / row[1] for row in rows]), med([row[2] / row[0] for row in rows])
    print(f"ratio per core (median of {a.rounds} rounds): {rc:.2f}x by CPU time, {rw:.2f}x by wall clock")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

if __name__ == "__main__":
    sys.exit(main())
