#!/usr/bin/python3
"""Validation of `vexp plan` on this machine (docs/planning.md, "Validation").

For each case (1 and 2 MPI ranks, emulated ranks, gradient accumulation, bucket sizes
25, 1 and 0.05 MiB, 1 and 2 compute threads, on the quickstart TSM, TSN and small I3D
recipes with few clips), this
  1. measures: `vexp run` (through `--nproc R` when R > 1) for a few steps, and takes
     the median of the logged `step_s` of metrics.jsonl after the first WARMUP steps
     (log_every = 1, so every step is logged), with the recipe's own loader settings
     (data.workers), which are what --measure-local's profiles were measured with; the
     epoch is tail() steps longer than the timed ones, untimed, so that the loader still
     decodes ahead through every timed step, as in a long run (in its last steps it has
     nothing left to decode and leaves the cores to compute);
     (each case --repeat times, default 3, in rounds of every case once, as --measure-local
     interleaves its profiles: the median is compared, the range printed; a repeat more
     than --settle slower than its case's fastest is measured again, up to --settle-tries
     times a case, the faster kept, as --measure-settle does with a profile's rounds);
  2. predicts: `vexp plan RECIPE --cluster CLUSTER --gpus RANKS --bucket-mb B --json` with
     the same --set values (and --fixed-batch when RANKS < world_size: RANKS ranks each
     emulating world_size / RANKS GPUs, as the run does), and takes `step_ms` (the plan
     picks the profile of the case's run.threads and ranks busy per node itself);
and prints a table of both with the relative error (prediction / measurement - 1) and
whether the measurement lies in the range the plan states (step_ms_low..high), then
per case the measured (metrics.jsonl data_s, compute_s, comm_s) against the predicted
(exposed data, compute, exposed comm) phases and the profile the plan took.
Exit status 1 when any |error| exceeds --tolerance (default 10 %).

    /usr/bin/python3 tools/plan/validate.py [--vexp build/bin/vexp] [--cluster clusters/local.toml]
        [--measure-local] [--repeat 3] [--cases NAME,...] [--tolerance 0.10] [--json FILE]

The cluster file should come from `vexp plan --measure-local RECIPES --measure-threads 1,2`
on this machine, RECIPES the quickstart recipes the cases use. With --measure-local the
script makes it itself, in the validation's rounds: before each round of the cases one
round of every profile (--measure-rounds 1), pooled with the rounds before it
(--measure-append), so that the profiles and the cases sample the same minutes of a
machine whose speed moves by a quarter within a few of them. It prints the load
averages before, after each round and after. About 10 minutes on a calm 2-core machine
with --repeat 3; 19-27 on this project's, with the calm-state waits and the retries.
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

TSM, TSN, I3D = ("recipes/quickstart/" + m + "_motion.toml" for m in ("tsm", "tsn", "i3d"))
# name, recipe, ranks, compute threads per rank, world_size, bucket_mb, batch_per_gpu,
# timed steps, accum_steps. Ranks run 1 or 2 at once on the node (busy ranks);
# "emu W on R": R ranks each emulating W / R GPUs; "acc2": 2 micro-batches per step.
CASES = [
    ("tsm 1r x1t", TSM, 1, 1, 1, 25, 32, 8, 1),
    ("tsm 1r x2t", TSM, 1, 2, 1, 25, 32, 8, 1),
    ("tsn 1r x1t", TSN, 1, 1, 1, 25, 32, 8, 1),
    ("tsn 1r x2t", TSN, 1, 2, 1, 25, 32, 8, 1),
    ("i3d 1r x1t", I3D, 1, 1, 1, 25, 32, 8, 1),
    ("i3d 1r x2t", I3D, 1, 2, 1, 25, 32, 8, 1),
    ("tsm 2r x1t b25", TSM, 2, 1, 2, 25, 32, 8, 1),
    ("tsm 2r x1t b1", TSM, 2, 1, 2, 1, 32, 8, 1),
    ("tsm 2r x1t b0.05", TSM, 2, 1, 2, 0.05, 32, 8, 1),
    ("tsn 2r x1t b1", TSN, 2, 1, 2, 1, 32, 8, 1),
    ("i3d 2r x1t b25", I3D, 2, 1, 2, 25, 32, 8, 1),
    ("i3d 2r x1t b0.05", I3D, 2, 1, 2, 0.05, 32, 8, 1),
    ("tsm emu 4 on 1r", TSM, 1, 1, 4, 25, 32, 6, 1),
    ("tsm emu 4 on 2r", TSM, 2, 1, 4, 25, 32, 6, 1),
    ("tsm 1r x1t acc2", TSM, 1, 1, 1, 25, 32, 6, 2),
    ("tsm 2r x1t acc2", TSM, 2, 1, 2, 25, 32, 6, 2),
]
WARMUP = 2
# The quickstart recipes' data.prefetch (the default): the loader decodes this many
# micro-batches ahead and stops when the epoch has no more; a case's epoch ends
# tail(micro) steps after its timed ones.
PREFETCH = 4


def tail(ranks, world, accum):
    micro = world // ranks * accum  # micro-batches per step and rank
    return -(-PREFETCH // micro) + 1
# metrics.jsonl step keys, and the plan row's prediction of each.
PHASES = ("step_s", "data_s", "compute_s", "comm_s")
PREDICTED = {"step_s": "step_ms", "data_s": "exposed_data_ms", "compute_s": "compute_ms", "comm_s": "exposed_comm_ms"}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def case_sets(ranks, threads, world, bucket, batch, steps, accum):
    # one epoch of WARMUP + steps + tail steps
    clips = (WARMUP + steps + tail(ranks, world, accum)) * world * batch * accum
    return [f"run.threads={threads}", f"dist.world_size={world}", f"dist.bucket_mb={bucket}",
            f"dist.batch_per_gpu={batch}", f"dist.accum_steps={accum}", f"data.params.train_clips={clips}",
            "data.params.val_clips=16", "run.epochs=1", "run.log_every=1", "run.progress=\"none\""]


def measure(vexp, recipe, ranks, threads, world, bucket, batch, steps, accum, work):
    out = os.path.join(work, "run")
    cmd = [vexp, "run", os.path.join(ROOT, recipe), "--set", f"run.out=\"{out}\""]
    for s in case_sets(ranks, threads, world, bucket, batch, steps, accum):
        cmd += ["--set", s]
    if ranks > 1:
        cmd += ["--nproc", str(ranks)]
    run(cmd)
    steps = []
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j.get("type") == "step":
                steps.append(j)
    timed = steps[WARMUP:-tail(ranks, world, accum)]
    if not timed:
        raise RuntimeError(f"{recipe}: no steps after the warm-up in {out}/metrics.jsonl")
    # Rank 0's phases per step: data_s (waiting for the loader), compute_s (forward +
    # backward, with the bucket allreduces overlapped in it, + optimizer), comm_s
    # (the reducer's finish: the exposed allreduce, and the loss's).
    phases = {k: statistics.median(t[k] for t in timed) * 1e3 for k in PHASES}
    return phases, len(timed)


def predict(vexp, cluster, recipe, ranks, threads, world, bucket, batch, steps, accum):
    # Weak scaling plans world_size = G on G ranks; fewer ranks than world_size is
    # --fixed-batch: G ranks each emulating world_size / G GPUs, as vexp run does.
    # The plan picks the profile of the case's run.threads and of the ranks busy at
    # once on the node (busy_ranks) itself.
    cmd = [vexp, "plan", os.path.join(ROOT, recipe), "--cluster", cluster, "--gpus", str(ranks),
           "--bucket-mb", str(bucket), "--json"]
    if ranks != world:
        cmd.append("--fixed-batch")
    for s in case_sets(ranks, threads, world, bucket, batch, steps, accum):
        cmd += ["--set", s]
    j = json.loads(run(cmd).stdout)
    rows = [r for r in j["plans"][0]["rows"] if r["gpus"] == ranks]
    if not rows:
        raise RuntimeError(f"vexp plan gave no row for {ranks} GPUs: {' '.join(cmd)}")
    return rows[0]["step_ms"], rows[0]


def core_speeds(cluster):
    # [cpu] core_speed_min and its source, as --measure-local measured them: cores of
    # different speeds (a virtual machine's vCPUs) make a one-rank step depend on the
    # core its thread lands on.
    try:
        import tomllib
        with open(cluster, "rb") as f:
            cpu = tomllib.load(f).get("cpu", {})
    except (ImportError, OSError, ValueError) as e:
        return f"unknown ({e})"
    if "core_speed_min" not in cpu:
        return "not measured"
    src = cpu.get("core_speed_source", "")
    said = src[src.find("before the compute profiles"):src.find("): the slowest") + 1] if "before" in src else src
    return f"the slowest at {cpu['core_speed_min'] * 100:.0f} % of the fastest ({said})"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Settle:
    """Waits, before a measurement, for the machine's calm state.

    The 2-core virtual machine's speed moves by 20-30 % within minutes (its vCPUs shared
    with the host's other work; docs/planning.md, "Validation"), and a profile measured in
    a slow stretch and a case in a fast one differ by that much whatever the model says.
    The probe: the small I3D at 2 threads (both cores, so that one slow vCPU slows it too),
    `vexp bench train --steps 8`, its median step (about 35 ms; 1.5 s with the process).
    Calm: within `tol` of the fast state's level, the median of the fastest third of this
    validation's probes (not their minimum: a probe is itself noisy by a few per cent, and
    the least of many noisy probes sinks below any state the machine holds, so that every
    later probe would fail). Otherwise it probes again every 5 s, for at most `patience`
    seconds, and then measures anyway (counted)."""

    def __init__(self, vexp, tol, patience):
        self.vexp, self.tol, self.patience = vexp, tol, patience
        self.probes, self.waited_s, self.waits, self.gave_up = [], 0.0, 0, 0

    def probe(self):
        j = json.loads(run([self.vexp, "bench", "train", os.path.join(ROOT, I3D), "--steps", "8", "--warmup", "2",
                            "--set", "run.threads=2", "--json"]).stdout)
        ms = j["phases"]["step"]["median_ms"]
        self.probes.append(ms)
        return ms

    def fast(self):
        p = sorted(self.probes)
        return statistics.median(p[:max(1, len(p) // 3)])

    def calibrate(self):
        for _ in range(3):
            self.probe()

    def wait(self):
        if self.tol <= 0:
            return
        t0 = time.time()
        while self.probe() > self.fast() * (1 + self.tol):
            if time.time() - t0 > self.patience:
                self.gave_up += 1
                break
            self.waits += 1
            time.sleep(5)
        self.waited_s += time.time() - t0

    def summary(self):
        if self.tol <= 0:
            return "not waited for (--settle 0)"
        p = sorted(self.probes)
        return (f"{len(p)} probes (the small I3D at 2 threads, median step) {p[0]:.1f}-{p[-1]:.1f} ms, median "
                f"{statistics.median(p):.1f}; calm = within {self.tol * 100:.0f} % of the fastest third's median "
                f"({self.fast():.1f}); waited "
                f"{self.waits} time(s), {self.waited_s:.0f} s with the probes; measured {self.gave_up} time(s) "
                f"after {self.patience:.0f} s without calm")


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
                    help="remake the cluster file with vexp plan --measure-local (the recipes of the cases, "
                         "--measure-threads 1,2), one round of its profiles before each round of the cases, pooled "
                         "(--measure-append), so that the profiles and the runs see the same minutes of the machine")
    ap.add_argument("--settle", type=float, default=0.10,
                    help="before each round of the profiles and each case, wait for the machine's calm state: a "
                         "probe within this fraction of the fastest third of the probes' median (0: do not wait)")
    ap.add_argument("--settle-tries", type=int, default=3,
                    help="times at most a case's repeats are measured again when one is more than --settle slower "
                         "than its fastest repeat (the faster kept)")
    ap.add_argument("--settle-patience", type=float, default=30,
                    help="seconds to wait for the calm state before measuring anyway")
    a = ap.parse_args()
    cases = CASES
    if a.cases:
        want = [c.strip() for c in a.cases.split(",")]
        cases = [c for c in CASES if c[0] in want]
        missing = set(want) - {c[0] for c in cases}
        if missing:
            sys.exit(f"validate.py: no such case: {', '.join(sorted(missing))}")
    recipes = sorted({c[1] for c in cases}, key=[c[1] for c in CASES].index)
    print(f"load average (1, 5, 15 min) before: {loadavg()}  (cluster {os.path.relpath(a.cluster, ROOT)})")
    # The repeats run in rounds, every case once a round: a drift of the machine's speed
    # during the validation reaches every case's median alike instead of the cases
    # measured in its slow minutes. With --measure-local, each round of the cases
    # follows one round of every profile (--measure-rounds 1, pooled with the rounds
    # before by --measure-append): the profiles and the cases then sample the same
    # minutes of the machine, whose speed moves by a quarter within a few of them.
    runs = {c[0]: [] for c in cases}
    secs = {c[0]: 0.0 for c in cases}
    timed_steps = {}
    settle = Settle(a.vexp, a.settle, a.settle_patience)
    if a.settle > 0:
        settle.calibrate()
    for r in range(a.repeat):
        if a.measure_local:
            settle.wait()
            t0 = time.time()
            run([a.vexp, "plan", "--measure-local", *(os.path.join(ROOT, x) for x in recipes), "--out", a.cluster,
                 "--measure-threads", "1,2", "--measure-rounds", "1", "--measure-settle", str(a.settle)]
                + (["--measure-append"] if r else []))
            print(f"profiles round {r + 1} of {a.repeat} measured in {time.time() - t0:.0f} s (load {loadavg()})",
                  flush=True)
        for name, recipe, ranks, threads, world, bucket, batch, steps, accum in cases:
            settle.wait()
            t0 = time.time()
            with tempfile.TemporaryDirectory() as work:
                ph, timed_steps[name] = measure(a.vexp, recipe, ranks, threads, world, bucket, batch, steps, accum,
                                                work)
            runs[name].append(ph)
            secs[name] += time.time() - t0
        print(f"round {r + 1} of {a.repeat} of the cases measured (load {loadavg()}; calm-state waits so far "
              f"{settle.waits}, {settle.waited_s:.0f} s with the probes)", flush=True)
    # A repeat more than --settle slower than its case's fastest repeat was caught in a
    # slow stretch that began after the calm-state probe before it: measured again (the
    # slowest first, the faster of the two kept), at most --settle-tries times a case, as
    # --measure-settle measures a profile's round again and leaves a slow round out of
    # the profile's pool. The cases and the profiles are then both the calm machine's.
    # The tries run in rounds too (every case that needs one, then again), so that one
    # case's tries are minutes apart rather than all in the same slow stretch.
    again = {c[0]: 0 for c in cases}
    for _ in range(a.settle_tries if a.settle > 0 else 0):
        for name, recipe, ranks, threads, world, bucket, batch, steps, accum in cases:
            each = runs[name]
            fastest = min(e["step_s"] for e in each)
            i = max(range(len(each)), key=lambda k: each[k]["step_s"])
            if each[i]["step_s"] > fastest * (1 + a.settle):
                settle.wait()
                t0 = time.time()
                with tempfile.TemporaryDirectory() as work:
                    ph, _ = measure(a.vexp, recipe, ranks, threads, world, bucket, batch, steps, accum, work)
                secs[name] += time.time() - t0
                again[name] += 1
                print(f"  {name}: a repeat at {each[i]['step_s']:.1f} ms is over {a.settle * 100:g} % slower than "
                      f"its fastest {fastest:.1f}: measured again, {ph['step_s']:.1f} ms", flush=True)
                if ph["step_s"] < each[i]["step_s"]:
                    each[i] = ph
    if a.settle > 0:
        print(f"cases measured again: {sum(again.values())} time(s) "
              f"({', '.join(f'{k} {v}' for k, v in again.items() if v) or 'none'}; load {loadavg()})", flush=True)
    print(f"cores: {core_speeds(a.cluster)}")
    print(f"calm state: {settle.summary()}")
    print(f"{'case':<18} {'ranks':>5} {'thr':>3} {'world':>5} {'bucket':>6} {'batch':>5} {'acc':>3} "
          f"{'measured ms':>11} {'spread':>13} {'predicted ms':>12} {'error':>7} {'stated range ms':>17}  bottleneck")
    results, worst, detail = [], 0.0, []
    for name, recipe, ranks, threads, world, bucket, batch, steps, accum in cases:
        each, n = runs[name], timed_steps[name]
        measured = {k: statistics.median(e[k] for e in each) for k in PHASES}
        ms = [e["step_s"] for e in each]
        m = measured["step_s"]
        p, row = predict(a.vexp, a.cluster, recipe, ranks, threads, world, bucket, batch, steps, accum)
        err = p / m - 1
        worst = max(worst, abs(err))
        lo, hi = row.get("step_ms_low", p), row.get("step_ms_high", p)
        inside = "in" if lo <= m <= hi else "OUT"
        print(f"{name:<18} {ranks:>5} {threads:>3} {world:>5} {bucket:>6g} {batch:>5} {accum:>3} {m:>11.1f} "
              f"{min(ms):>6.0f}-{max(ms):<6.0f} {p:>12.1f} {err * 100:>+6.1f}% {lo:>7.0f}-{hi:<6.0f}{inside:>3}  "
              f"{row.get('bottleneck', '')}  "
              f"({len(ms)} x {n} steps{f', {again[name]} measured again' if again[name] else ''}, "
              f"{secs[name]:.0f} s)", flush=True)
        detail.append((name, measured, row))
        results.append({"case": name, "recipe": recipe, "ranks": ranks, "threads": threads, "world_size": world,
                        "bucket_mb": bucket, "batch_per_gpu": batch, "accum_steps": accum, "measured_ms": m, "measured_each": each,
                        "measured_phases_ms": measured, "measured_again": again[name], "predicted_ms": p, "error": err,
                        "in_stated_range": lo <= m <= hi, "plan_row": row})
    print("\nper phase, ms (measured: medians of rank 0's metrics.jsonl data_s, compute_s, comm_s; predicted: the "
          "plan row's exposed data, compute, exposed comm)")
    print(f"{'case':<18} {'data m/p':>15} {'compute m/p':>17} {'comm m/p':>15}  profile")
    for name, mp, row in detail:
        cells = [f"{mp[k]:>7.1f}/{row[PREDICTED[k]]:<7.1f}" for k in ("data_s", "compute_s", "comm_s")]
        print(f"{name:<18} {cells[0]:>15} {cells[1]:>17} {cells[2]:>15}  {row.get('profile_source', '')}")
    print(f"load average (1, 5, 15 min) after: {loadavg()}; largest |error| {worst * 100:.1f} % "
          f"(tolerance {a.tolerance * 100:.0f} %)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 1 if worst > a.tolerance else 0


if __name__ == "__main__":
    sys.exit(main())
