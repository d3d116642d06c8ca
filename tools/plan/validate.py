#!/usr/bin/python3
"""Validation of `vexp plan` on this machine (docs/planning.md, "Validation").

For each case (1 and 2 MPI ranks, emulated ranks, several bucket sizes and thread
counts, on the quickstart recipes with few clips), this
  1. measures: `vexp run` (through `--nproc R` when R > 1) for a few steps, and takes
     the median of the logged `step_s` of metrics.jsonl after the first WARMUP steps
     (log_every = 1, so every step is logged);
     (each case --repeat times, default 3: the median is compared, the range printed);
  2. predicts: `vexp plan RECIPE --cluster CLUSTER --gpus RANKS --bucket-mb B --json` with
     the same --set values (and --fixed-batch when RANKS < world_size: RANKS ranks each
     emulating world_size / RANKS GPUs, as the run does), from a copy of the cluster file
     holding only the profiles measured at the case's thread count, and takes `step_ms`;
and prints a table of both with the relative error (prediction / measurement - 1).
Exit status 1 when any |error| exceeds --tolerance (default 10 %).

    /usr/bin/python3 tools/plan/validate.py [--vexp build/bin/vexp] [--cluster clusters/local.toml]
        [--measure-local] [--repeat 3] [--cases NAME,...] [--tolerance 0.10] [--json FILE]

The cluster file should come from `vexp plan --measure-local --measure-threads 1,2` on
this machine just before (--measure-local does that first): a shared machine's speed
drifts with its load; the script prints the load average before and after. About 8
minutes on the 2-core machine with --repeat 2.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name, recipe, ranks, compute threads per rank, world_size, bucket_mb, batch_per_gpu, timed steps
CASES = [
    ("tsm 1r x1t", "recipes/quickstart/tsm_motion.toml", 1, 1, 1, 25, 32, 6),
    ("tsm 1r x2t", "recipes/quickstart/tsm_motion.toml", 1, 2, 1, 25, 32, 6),
    ("tsn 1r x1t", "recipes/quickstart/tsn_motion.toml", 1, 1, 1, 25, 32, 6),
    ("tsm 2r x1t b25", "recipes/quickstart/tsm_motion.toml", 2, 1, 2, 25, 32, 6),
    ("tsm 2r x1t b0.05", "recipes/quickstart/tsm_motion.toml", 2, 1, 2, 0.05, 32, 6),
    ("tsn 2r x1t b1", "recipes/quickstart/tsn_motion.toml", 2, 1, 2, 1, 32, 6),
    ("tsm emu 4 on 1r", "recipes/quickstart/tsm_motion.toml", 1, 1, 4, 25, 32, 4),
    ("tsm emu 4 on 2r", "recipes/quickstart/tsm_motion.toml", 2, 1, 4, 25, 32, 4),
]
WARMUP = 2


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def case_sets(ranks, threads, world, bucket, batch, steps):
    clips = (steps + WARMUP) * world * batch  # one epoch of steps + WARMUP steps
    return [f"run.threads={threads}", f"dist.world_size={world}", f"dist.bucket_mb={bucket}",
            f"dist.batch_per_gpu={batch}", f"data.params.train_clips={clips}", "data.params.val_clips=16",
            "run.epochs=1", "run.log_every=1", "run.progress=\"none\"", "data.workers=1"]


def measure(vexp, recipe, ranks, threads, world, bucket, batch, steps, work):
    out = os.path.join(work, "run")
    cmd = [vexp, "run", os.path.join(ROOT, recipe), "--set", f"run.out=\"{out}\""]
    for s in case_sets(ranks, threads, world, bucket, batch, steps):
        cmd += ["--set", s]
    if ranks > 1:
        cmd += ["--nproc", str(ranks)]
    run(cmd)
    steps_s = []
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j.get("type") == "step":
                steps_s.append(j["step_s"])
    timed = steps_s[WARMUP:]
    if not timed:
        raise RuntimeError(f"{recipe}: no steps after the warm-up in {out}/metrics.jsonl")
    return statistics.median(timed) * 1e3, len(timed)


def cluster_for_threads(cluster, threads):
    """The cluster file with only the [[gpu.profile]] blocks measured at `threads` compute
    threads (vexp plan takes the first profile whose model, clip and precision match; the
    profiles --measure-threads 1,2 writes differ only in their threads). Written next to
    the cluster file, whose `from` paths are relative to it."""
    blocks, cur = [], []
    with open(cluster) as f:
        for line in f:
            if line.startswith("[") and cur:
                blocks.append(cur)
                cur = []
            cur.append(line)
    blocks.append(cur)
    keep = []
    for b in blocks:
        if b[0].startswith("[[gpu.profile]]") and not any(
                l.startswith("from") and f"_t{threads}.json" in l for l in b):
            continue
        keep.append("".join(b))
    path = os.path.join(os.path.dirname(cluster), f".validate_t{threads}.toml")
    with open(path, "w") as f:
        f.write("".join(keep))
    return path


def predict(vexp, cluster, recipe, ranks, threads, world, bucket, batch, steps):
    path = cluster_for_threads(cluster, threads)
    try:
        # Weak scaling plans world_size = G on G ranks; fewer ranks than world_size is
        # --fixed-batch: G ranks each emulating world_size / G GPUs, as vexp run does.
        cmd = [vexp, "plan", os.path.join(ROOT, recipe), "--cluster", path, "--gpus", str(ranks),
               "--bucket-mb", str(bucket), "--json"]
        if ranks != world:
            cmd.append("--fixed-batch")
        for s in case_sets(ranks, threads, world, bucket, batch, steps):
            cmd += ["--set", s]
        j = json.loads(run(cmd).stdout)
    finally:
        os.remove(path)
    rows = [r for r in j["plans"][0]["rows"] if r["gpus"] == ranks]
    if not rows:
        raise RuntimeError(f"vexp plan gave no row for {ranks} GPUs: {' '.join(cmd)}")
    return rows[0]["step_ms"], rows[0]


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vexp", default=os.path.join(ROOT, "build/bin/vexp"))
    ap.add_argument("--cluster", default=os.path.join(ROOT, "clusters/local.toml"))
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--json", default="", help="also write the table as JSON to this file")
    ap.add_argument("--repeat", type=int, default=3,
                    help="measure each case this many times; the median is compared, the spread printed (noise)")
    ap.add_argument("--measure-local", action="store_true",
                    help="first remake the cluster file with vexp plan --measure-local (its default recipes, "
                         "--measure-threads 1,2), so that it and the runs see the same machine load")
    a = ap.parse_args()
    cases = CASES
    if a.cases:
        want = [c.strip() for c in a.cases.split(",")]
        cases = [c for c in CASES if c[0] in want]
        missing = set(want) - {c[0] for c in cases}
        if missing:
            sys.exit(f"validate.py: no such case: {', '.join(sorted(missing))}")
    if a.measure_local:
        print(f"load average before --measure-local: {loadavg()}")
        run([a.vexp, "plan", "--measure-local", "--out", a.cluster, "--measure-threads", "1,2"])
    print(f"load average before: {loadavg()}  (cluster {os.path.relpath(a.cluster, ROOT)})")
    print(f"{'case':<18} {'ranks':>5} {'thr':>3} {'world':>5} {'bucket':>6} {'batch':>5} "
          f"{'measured ms':>11} {'spread':>13} {'predicted ms':>12} {'error':>7}  bottleneck")
    results, worst = [], 0.0
    for name, recipe, ranks, threads, world, bucket, batch, steps in cases:
        t0 = time.time()
        ms, n = [], 0
        for _ in range(a.repeat):
            with tempfile.TemporaryDirectory() as work:
                m1, n = measure(a.vexp, recipe, ranks, threads, world, bucket, batch, steps, work)
                ms.append(m1)
        secs = time.time() - t0
        m = statistics.median(ms)
        p, row = predict(a.vexp, a.cluster, recipe, ranks, threads, world, bucket, batch, steps)
        err = p / m - 1
        worst = max(worst, abs(err))
        print(f"{name:<18} {ranks:>5} {threads:>3} {world:>5} {bucket:>6g} {batch:>5} {m:>11.1f} "
              f"{min(ms):>6.0f}-{max(ms):<6.0f} {p:>12.1f} {err * 100:>+6.1f}%  {row.get('bottleneck', '')}  "
              f"({len(ms)} x {n} steps, {secs:.0f} s)")
        results.append({"case": name, "recipe": recipe, "ranks": ranks, "threads": threads, "world_size": world,
                        "bucket_mb": bucket, "batch_per_gpu": batch, "measured_ms": m, "measured_each_ms": ms, "predicted_ms": p,
                        "error": err, "plan_row": row})
    print(f"load average after: {loadavg()}; largest |error| {worst * 100:.1f} % (tolerance {a.tolerance * 100:.0f} %)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 1 if worst > a.tolerance else 0


if __name__ == "__main__":
    sys.exit(main())
