#!/usr/bin/python3
"""vexp against a PyTorch reference on the same CPU, model, input and thread count.

Runs, interleaved round by round, `vexp bench train --synthetic` on the Kinetics
TSM / TSN / I3D recipes and a PyTorch reference (torchvision ResNet-50 with the
official TSM shift semantics on the residual branch's input: zeros + slice
copies; SGD momentum 0.9, weight decay 1e-4), each in its own process so that
its peak RSS is its own, and prints the ratios the project's goals are stated in.

Needs Debian's /usr/bin/python3 (torch + torchvision). Usage:
  /usr/bin/python3 tools/bench/cpu_vs_pytorch.py [--vexp build/tools/vexp/vexp]
      [--threads 2] [--clips 2] [--frames 8] [--size 112] [--steps 5] [--warmup 2]
      [--rounds 2] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RECIPES = {
    "tsm": "recipes/kinetics400/tsm_r50_8f.toml",
    "tsn": "recipes/kinetics400/tsn_r50_8f.toml",
    "i3d333": "recipes/kinetics400/i3d_r50_333_32f.toml",
    "i3d311": "recipes/kinetics400/i3d_r50_311_32f.toml",
}


# ---------------------------------------------------------------- PyTorch side
def torch_worker(args):
    """Runs in a child process: times the reference's training step, prints JSON."""
    import torch
    import torch.nn as nn
    import torchvision

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    T = args.frames

    class ShiftedConv(nn.Module):
        """Official TSM 'blockres' semantics: 1/8 of the channels from t+1, 1/8 from
        t-1, zeros at the clip ends, applied to the residual branch's input."""

        def __init__(self, net, frames, fold_div=8):
            super().__init__()
            self.net, self.frames, self.fold_div = net, frames, fold_div

        def forward(self, x):
            nt, c, h, w = x.size()
            x = x.view(nt // self.frames, self.frames, c, h, w)
            fold = c // self.fold_div
            out = torch.zeros_like(x)
            out[:, :-1, :fold] = x[:, 1:, :fold]
            out[:, 1:, fold:2 * fold] = x[:, :-1, fold:2 * fold]
            out[:, :, 2 * fold:] = x[:, :, 2 * fold:]
            return self.net(out.view(nt, c, h, w))

    class VideoNet(nn.Module):
        def __init__(self, shift):
            super().__init__()
            self.base = torchvision.models.resnet50()
            self.base.fc = nn.Sequential(nn.Dropout(0.5), nn.Linear(2048, 400))
            if shift:
                for layer in (self.base.layer1, self.base.layer2, self.base.layer3, self.base.layer4):
                    for block in layer:
                        block.conv1 = ShiftedConv(block.conv1, T)

        def forward(self, x):  # [N, T, C, H, W]
            n = x.size(0)
            y = self.base(x.view((-1,) + x.shape[2:]))
            return y.view(n, T, -1).mean(1)  # average consensus

    if args.torch_worker == "shift":
        x = torch.randn(args.shift_shape)
        buf = torch.empty_like(x)
        shift = ShiftedConv(nn.Identity(), T)

        def med(f, reps=args.reps):
            f(); f()
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
            return statistics.median(ts)

        with torch.no_grad():
            t_copy = med(lambda: buf.copy_(x))
            t_fwd = med(lambda: shift(x))
        xg = x.clone().requires_grad_(True)
        g = torch.randn_like(x)

        def fb():
            xg.grad = None
            shift(xg).backward(g)
        t_fb = med(fb)
        nbytes = x.numel() * x.element_size()
        print(json.dumps({"copy_ms": t_copy * 1e3, "forward_ms": t_fwd * 1e3, "forward_backward_ms": t_fb * 1e3,
                          "copy_gbs": 2 * nbytes / t_copy / 1e9, "forward_gbs": 2 * nbytes / t_fwd / 1e9}))
        return

    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model = VideoNet(args.torch_worker == "tsm").to(dev)
    if cuda or args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    # torch.compile: the first (warm-up) step compiles; the timed steps run the compiled graph.
    net = torch.compile(model) if args.compile else model
    clips = [torch.randn(args.clips, T, 3, args.size, args.size, device=dev) for _ in range(2)]
    labels = [torch.randint(0, 400, (args.clips,), device=dev) for _ in range(2)]
    phases = {k: [] for k in ("step", "forward", "backward", "optimizer")}
    for i in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.amp == "bf16"):
            loss = nn.functional.cross_entropy(net(clips[i % 2]), labels[i % 2])
        loss.item()
        t1 = time.perf_counter()
        loss.backward()
        sync()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad()
        sync()
        t3 = time.perf_counter()
        if i >= args.warmup:
            phases["step"].append(t3 - t0)
            phases["forward"].append(t1 - t0)
            phases["backward"].append(t2 - t1)
            phases["optimizer"].append(t3 - t2)
    r = {k: statistics.median(v) * 1e3 for k, v in phases.items()}
    r["clips_per_s"] = args.clips * 1e3 / r["step"]
    r["compiled"] = bool(args.compile)
    r["torch"] = torch.__version__
    if cuda:
        r["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(r))


# ---------------------------------------------------------------- driver side
def run_measured(cmd, env=None):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    # Read the pipes before reaping so a chatty child cannot block.
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), err.decode(errors="replace")))
    return json.loads(out), ru.ru_maxrss / 1024.0


def vexp_train(a, name, env_extra=None, extra_args=()):
    # I3D runs at its recipe's own clip length (32 frames) unless --i3d-frames says
    # otherwise: the paper compares TSM 8f with I3D 32f per clip.
    i3d = name.startswith("i3d")
    frames = (a.i3d_frames or 0) if i3d else a.frames
    steps, warmup = (a.i3d_steps, 1) if i3d else (a.steps, a.warmup)
    cmd = [a.vexp, "bench", "train", RECIPES[name], "--synthetic", "--json", "--steps", str(steps),
           "--warmup", str(warmup), "--set", "run.threads=%d" % a.threads,
           "--set", "dist.batch_per_gpu=%d" % a.clips, "--set", "data.params.input_size=%d" % a.size,
           # one GPU's step (the recipes' world_size = 8 would be 8 emulated micro-batches per step)
           "--set", "dist.world_size=1"]
    if frames:
        cmd += ["--set", "data.params.frames=%d" % frames]
    cmd += list(extra_args)
    env = dict(os.environ, **(env_extra or {}))
    r, rss = run_measured(cmd, env)
    return {"frames": r["clip"][0], "step": r["phases"]["step"]["median_ms"], "forward": r["phases"]["forward"]["median_ms"],
            "backward": r["phases"]["backward"]["median_ms"], "optimizer": r["phases"]["optimizer"]["median_ms"],
            "rss_mb": rss}


def torch_train(a, name, channels_last=False):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", name, "--threads", str(a.threads),
           "--clips", str(a.clips), "--frames", str(a.frames), "--size", str(a.size), "--steps", str(a.steps),
           "--warmup", str(a.warmup)] + (["--channels-last"] if channels_last else [])
    r, rss = run_measured(cmd)
    r["rss_mb"] = rss
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vexp", default=os.path.join(ROOT, "build/bin/vexp"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clips", type=int, default=2)
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-i3d", action="store_true", help="skip the I3D recipes")
    ap.add_argument("--i3d-frames", type=int, default=0, help="I3D clip length (0: the recipe's, 32)")
    ap.add_argument("--i3d-steps", type=int, default=2, help="timed I3D steps (after 1 warm-up)")
    ap.add_argument("--i3d-rounds", type=int, default=1, help="rounds that include I3D (the first ones)")
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument("--torch-worker", choices=["tsm", "tsn", "shift"], help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    ap.add_argument("--amp", choices=["none", "bf16"], default="none", help=argparse.SUPPRESS)
    ap.add_argument("--channels-last", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)  # torch.compile the model
    ap.add_argument("--shift-shape", type=int, nargs=4, default=[16, 256, 56, 56], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_worker:
        return torch_worker(a)
    if not os.access(a.vexp, os.X_OK):
        sys.exit("no vexp executable at '%s' (build it, or pass --vexp)" % a.vexp)

    runs = {}  # label -> list of results
    def add(label, r):
        runs.setdefault(label, []).append(r)
        print("  %-23s %2d frames  step %8.1f ms  fwd %7.1f  bwd %7.1f  opt %6.1f  peak RSS %6.0f MB" %
              (label, r.get("frames", a.frames), r["step"], r["forward"], r["backward"], r["optimizer"], r["rss_mb"]), flush=True)

    print("input: %d clips x %d frames x %d^2, %d threads, median of %d steps after %d warm-up, %d rounds" %
          (a.clips, a.frames, a.size, a.threads, a.steps, a.warmup, a.rounds), flush=True)
    for rnd in range(a.rounds):
        print("round %d" % (rnd + 1), flush=True)
        # vexp as a user runs it: the recipes' [run] memory_format = "auto" (channels-last).
        add("vexp tsm", vexp_train(a, "tsm"))
        add("pytorch tsm", torch_train(a, "tsm"))
        add("vexp tsn", vexp_train(a, "tsn"))
        add("pytorch tsn", torch_train(a, "tsn"))
        add("pytorch tsm channels-last", torch_train(a, "tsm", channels_last=True))
        add("vexp tsm (glibc malloc)", vexp_train(a, "tsm", {"VEXP_MALLOC_TUNING": "0"}))
        add("vexp tsm contiguous", vexp_train(a, "tsm", extra_args=["--memory-format", "contiguous"]))
        add("vexp tsn contiguous", vexp_train(a, "tsn", extra_args=["--memory-format", "contiguous"]))
        if not a.no_i3d and rnd < a.i3d_rounds:
            add("vexp i3d 3x3x3", vexp_train(a, "i3d333"))
            add("vexp i3d 3x1x1", vexp_train(a, "i3d311"))

    # The shift operator alone, vexp and the reference's slice assignments.
    shape = "%dx%dx%dx%d" % tuple(a.shift_shape)
    op_cmd = [a.vexp, "bench", "op", "temporal_shift", "--shape", shape, "--frames", str(a.frames),
              "--threads", str(a.threads), "--reps", str(a.reps), "--json"]
    op, _ = run_measured(op_cmd)
    op_cl, _ = run_measured(op_cmd + ["--channels-last"])
    ref_op, _ = run_measured([sys.executable, os.path.abspath(__file__), "--torch-worker", "shift", "--threads",
                              str(a.threads), "--frames", str(a.frames), "--reps", str(a.reps), "--shift-shape"] +
                             [str(v) for v in a.shift_shape])

    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0] if f != "frames"} for k, v in runs.items()}
    peak = {k: max(r["rss_mb"] for r in v) for k, v in runs.items()}
    print("\nmedians over rounds (ms / step):")
    for k, v in med.items():
        print("  %-22s %8.1f ms  (%.2f clips/s)  peak RSS %6.0f MB" % (k, v["step"], a.clips * 1e3 / v["step"], peak[k]))
    # The strongest reference: PyTorch in whichever layout was faster here.
    best_torch = min(med["pytorch tsm"]["step"], med["pytorch tsm channels-last"]["step"])
    ratios = [
        ("vexp TSM step / PyTorch TSM step", med["vexp tsm"]["step"] / med["pytorch tsm"]["step"], "<= 0.9"),
        ("vexp TSM / PyTorch TSM, faster layout", med["vexp tsm"]["step"] / best_torch, "<= 0.9"),
        ("vexp TSN step / PyTorch TSN step", med["vexp tsn"]["step"] / med["pytorch tsn"]["step"], ""),
        ("vexp TSM step / vexp TSN step", med["vexp tsm"]["step"] / med["vexp tsn"]["step"], "<= 1.02"),
        ("PyTorch TSM step / PyTorch TSN step", med["pytorch tsm"]["step"] / med["pytorch tsn"]["step"], ""),
        ("vexp TSM contiguous / TSN contiguous", med["vexp tsm contiguous"]["step"] / med["vexp tsn contiguous"]["step"], ""),
        ("vexp TSM contiguous / channels-last", med["vexp tsm contiguous"]["step"] / med["vexp tsm"]["step"], ""),
        ("PyTorch TSM channels-last / NCHW", med["pytorch tsm channels-last"]["step"] / med["pytorch tsm"]["step"], ""),
        ("vexp TSM, glibc malloc / tuned", med["vexp tsm (glibc malloc)"]["step"] / med["vexp tsm"]["step"], ""),
        ("shift fwd GB/s / copy GB/s (vexp)", op["forward_vs_copy"], ">= 0.8"),
        ("shift fwd+bwd / 2 copies (vexp)", op["forward_backward_vs_copy"], ""),
        ("shift fwd / copy, channels-last (vexp)", op_cl["forward_vs_copy"], ">= 0.8"),
        ("shift fwd+bwd / 2 copies, chan.-last", op_cl["forward_backward_vs_copy"], ""),
        ("shift fwd GB/s / copy GB/s (PyTorch)", ref_op["copy_ms"] / ref_op["forward_ms"], ""),
        ("peak RSS vexp TSM / PyTorch TSM", peak["vexp tsm"] / peak["pytorch tsm"], "<= 1.0"),
    ]
    if not a.no_i3d:
        f3 = runs["vexp i3d 3x3x3"][0]["frames"]
        ratios += [("TSM %df / I3D-3x3x3 %df clips/s" % (a.frames, f3),
                    med["vexp i3d 3x3x3"]["step"] / med["vexp tsm"]["step"], "paper 1.8 (GPU)"),
                   ("TSM %df / I3D-3x1x1 %df clips/s" % (a.frames, f3),
                    med["vexp i3d 3x1x1"]["step"] / med["vexp tsm"]["step"], "")]
    print("\nratios:")
    for name, v, goal in ratios:
        print("  %-38s %6.3f   %s" % (name, v, ("goal " + goal) if goal else ""))
    print("\nshift op [%s] fp32: vexp copy %.2f ms (%.1f GB/s), forward %.2f ms (%.1f GB/s), fwd+bwd %.2f ms;"
          " PyTorch copy %.2f ms, slice-assignment forward %.2f ms (%.1f GB/s), fwd+bwd %.2f ms" %
          (shape, op["copy"]["ms"], op["copy"]["gb_per_s"], op["forward"]["ms"], op["forward"]["gb_per_s"],
           op["forward_backward"]["ms"], ref_op["copy_ms"], ref_op["forward_ms"], ref_op["forward_gbs"],
           ref_op["forward_backward_ms"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "runs": runs, "medians": med, "peak_rss_mb": peak, "op": op, "op_channels_last": op_cl,
                       "reference_op": ref_op, "ratios": {n: v for n, v, _ in ratios}}, f, indent=2)


if __name__ == "__main__":
    main()
