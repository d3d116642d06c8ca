#!/usr/bin/env bash
# Distributed end-to-end tests. Usage: dist_tests.sh NAME VEXP SOURCE_DIR MPIRUN
name=$1 vexp=$2 src=$3 mpirun=$4
here=$(cd "$(dirname "$0")" && pwd)
bg=""
cleanup() { [ -n "$bg" ] && kill -9 $bg 2>/dev/null; }  # then setup.sh removes $tmp
source "$src/tests/support/setup.sh" dist
MPI=("$mpirun" --allow-run-as-root --oversubscribe --bind-to none)
export VEXP_TEST_EPOCHS=${VEXP_TEST_EPOCHS:-2}

expect_fail() {
  "$@" >"$tmp/out" 2>&1; local rc=$?
  [ "$rc" -ne 0 ] || { cat "$tmp/out" >&2; fail "'$*' succeeded, expected a failure"; }
}
# testlib's no_crash also refuses "Aborted"; a failing rank's mpirun output may say so.
no_crash() {
  for bad in "terminate called" "core dumped" "Segmentation fault"; do
    ! grep -qF -- "$bad" "$tmp/out" || { cat "$tmp/out" >&2; fail "output has: $bad"; }
  done
}
# same_params A B: the last checkpoints of two run directories hold the same
# parameters (max abs difference <= 1e-5) and, when asked, the same loss curve.
same_params() {
  $PY - "$1" "$2" "${3:-}" <<'PY' || fail "runs $1 and $2 differ"
import glob, json, os, sys, torch
a, b, curve = sys.argv[1], sys.argv[2], sys.argv[3] == "curve"
def last(d):  # the newest checkpoint (not a hook's epoch_NNNN.TAG.pt beside it)
    return torch.load(sorted(f for f in glob.glob(d + "/checkpoints/epoch_*.pt") if os.path.basename(f).count(".") == 1)[-1], weights_only=True)
ca, cb = last(a), last(b)
ma, mb = ca["model"], cb["model"]
skip = ("running_mean", "running_var", "num_batches_tracked")   # per-GPU BatchNorm statistics
keys = [k for k in ma if not k.endswith(skip)]
assert keys and set(keys) <= set(mb), "parameter names differ"
d = max((ma[k].double() - mb[k].double()).abs().max().item() for k in keys)
print(f"max abs parameter difference over {len(keys)} tensors: {d:.3g}")
assert d <= 1e-5, d
assert ca["meta"] if "meta" in ca else True
if curve:
    def losses(d):
        return [(j["global_step"], j["loss"]) for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "step"]
    la, lb = losses(a), losses(b)
    assert [s for s, _ in la] == [s for s, _ in lb] and la, (la, lb)
    dl = max(abs(x - y) for (_, x), (_, y) in zip(la, lb))
    print(f"{len(la)} logged steps, max loss difference {dl:.3g}")
    assert dl <= 1e-5, dl
PY
}
# same_ema RUN...: the ema hook's weight files beside every checkpoint, the ema figures
# of every evaluation and the summary's are the same in every run, bit for bit.
same_ema() {
  $PY - "$@" <<'PY' || fail "the ema hook differs between $*"
import glob, json, os, sys, torch
runs = sys.argv[1:]
def ema_files(d): return sorted(os.path.basename(f) for f in glob.glob(d + "/checkpoints/*.ema.pt"))
def evals(d):
    return [{k: v for k, v in j.items() if k in ("global_step", "top1", "val_loss", "ema_top1", "ema_top5", "ema_loss")}
            for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "eval"]
files = ema_files(runs[0])
assert files and all(f"epoch_{e:04d}.ema.pt" in files for e in range(1, len(files) + 1)), files
ref = evals(runs[0])
assert ref and all("ema_top1" in e for e in ref), ref
for d in runs[1:]:
    assert ema_files(d) == files, (d, ema_files(d), files)
    for f in files:
        a, b = (torch.load(f"{x}/checkpoints/{f}", weights_only=True) for x in (runs[0], d))
        assert list(a) == list(b) and a, f
        for k in a:
            assert torch.equal(a[k], b[k]), (d, f, k)
    assert evals(d) == ref, (d, evals(d), ref)
    s0, s = (json.load(open(x + "/summary.json")) for x in (runs[0], d))
    assert s["ema_top1"] == s0["ema_top1"] and s["hook_weights"] == s0["hook_weights"], (s, s0)
print(len(files), "ema files and", len(ref), "evaluations equal over", len(runs), "runs")
PY
}
# same_state A B [TOL]: the last checkpoints of two run directories hold the same
# parameters, BatchNorm buffers and optimizer state (bit-identical by default; with
# TOL, each tensor's max abs difference over its largest value <= TOL), and their
# summaries the same top-1 and top-5.
same_state() {
  $PY - "$1" "$2" "${3:-0}" <<'PY' || fail "runs $1 and $2 differ"
import glob, json, os, sys, torch
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
def last(d):  # the newest checkpoint (not a hook's epoch_NNNN.TAG.pt beside it)
    return torch.load(sorted(f for f in glob.glob(d + "/checkpoints/epoch_*.pt") if os.path.basename(f).count(".") == 1)[-1], weights_only=True)
ca, cb = last(a), last(b)
for part in ("model", "optimizer"):
    ta, tb = ca[part], cb[part]
    assert set(ta) == set(tb) and ta, f"{part}: names differ"
    worst = (0.0, "")
    for k in ta:
        xa, xb = ta[k], tb[k]
        if isinstance(xa, dict):
            pairs = [(xa[j], xb[j]) for j in xa]
        else:
            pairs = [(xa, xb)]
        for u, v in pairs:
            if isinstance(u, torch.Tensor):
                d = (u.double() - v.double()).abs().max().item() if u.numel() else 0.0
                if tol > 0 and d > 0:  # relative to the tensor's largest value
                    d /= max(u.double().abs().max().item(), 1e-12)
                worst = max(worst, (d, k))
    print(f"{part}: {len(ta)} entries, max {'relative' if tol > 0 else 'abs'} difference {worst[0]:.3g} ({worst[1]})")
    assert worst[0] <= tol, worst
buffers = [k for k in ca["model"] if k.endswith(("running_mean", "running_var", "num_batches_tracked"))]
assert buffers, "no BatchNorm buffers in the checkpoint"
sa, sb = (json.load(open(d + "/summary.json")) for d in (a, b))
print("top-1", sa["top1"], sb["top1"], "top-5", sa["top5"], sb["top5"])
assert sa["top1"] == sb["top1"] and sa["top5"] == sb["top5"]
PY
}
rank_pid() {  # rank_pid MPIRUN_PID RANK: the pid of that rank
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
}
wait_for_file() {  # wait_for_file PATH SECONDS
  local i
  for ((i = 0; i < $2 * 20; i++)); do [ -e "$1" ] && return 0; sleep 0.05; done
  return 1
}

cd "$here"
R=data/tiny_dist.toml
case "$name" in
dry_run_paper)
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_1536.toml" --dry-run
  expect_out "world size:        1536 GPUs (ranks launched: 1)"
  expect_out "emulation:         1536 GPUs on 1 rank(s), 1536 micro-batches per rank per step"
  expect_out "global batch:      12288 clips, 98304 frames"
  # Every clip once per epoch: 19.57 steps per epoch, epochs of 19 or 20 steps.
  expect_out "training clips:    240436 per epoch, each seen once per epoch (none dropped)"
  expect_out "steps per epoch:   240436/12288 = 19.57, 19 or 20 (steps from 0: epoch 1 = 0-19, 2 = 20-39, 3 = 40-58, ..., 50 = 959-978)"
  expect_out "total:             979 steps, 12029952 clips = 50 epochs x 240436 + 8152 of the next shuffle filling the last step"
  expect_out "learning rate:     1.92 (base_lr 0.02 at 128 clips, linear scaling x96)"
  expect_out "warmup:            98 steps (5 epochs of clips) from 0 to 1.92"
  expect_out "decay:             cosine over steps 98..979 to 0"
  expect_out "gradient traffic:  24327632 parameters, 97.31 MB per step per rank (fp32 wire), 4 bucket(s)"
  # The I3D counterparts plan the same world with 32-frame clips.
  for v in 311:28043472 333:33433808; do
    expect_rc 0 -- "$vexp" run "$src/recipes/i3d${v%%:*}_k400_1536.toml" --dry-run
    expect_out "global batch:      12288 clips, 393216 frames"
    expect_out "gradient traffic:  ${v##*:} parameters"
  done
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_6144_accum4.toml" --dry-run --nproc 1536
  expect_out "accumulation:      4 micro-batch(es) of 8 clips per GPU per step"
  expect_out "global batch:      49152 clips, 393216 frames"
  expect_out "learning rate:     7.68 (base_lr 0.02 at 128 clips, linear scaling x384)"
  expect_out "steps per epoch:   240436/49152 = 4.89, 4 or 5"
  expect_out "total:             245 steps, 12042240 clips = 50 epochs x 240436 + 20440 of the next shuffle filling the last step"
  expect_out "warmup:            25 steps (5 epochs of clips) from 0 to 7.68"
  expect_rc 0 -- "$vexp" run "$src/recipes/tsm_k400_8gpu.toml" --dry-run
  expect_out "steps per epoch:   240436/64 = 3756.81, 3756 or 3757"
  expect_out "decay:             step, x0.1 at steps [75137, 150273] (the first steps of epochs 21, 41)"
  expect_out "warmup:            none"
  expect_out "learning rate:     0.01 (base_lr"
  # Geometry errors are one sentence and exit 2.
  expect_rc 2 -- "$vexp" run "$src/recipes/tsm_k400_1536.toml" --dry-run --nproc 7
  expect_out "dist.world_size = 1536 is not a multiple of the 7 ranks launched"
  no_crash
  ;;
exact_any_rank_count)
  # dist.reduction = "exact": a world of 8 GPUs trained on 1, 2, 4 and 8 ranks, with
  # accum_steps 1 and 2, and moved from 8 ranks to 2 after its first epoch, ends
  # bit-identical to the 1-rank run: parameters, optimizer state, BatchNorm buffers,
  # every logged loss and top-1 (tools/bench/rank_counts.sh prints the table).
  "$src/tools/bench/rank_counts.sh" "$vexp" exact 3 --expect-equal >"$tmp/out" 2>&1 ||
    { cat "$tmp/out" >&2; fail "the exact reduction is not bit-identical on every rank count"; }
  cat "$tmp/out"
  expect_out "| 2 | 8 then 2 (moved) | 0 | 0 | 0 | yes | yes |"
  # The dry run and the start of a run say which reduction sums the gradients.
  expect_rc 0 -- "$vexp" run $R --set dist.reduction=\"exact\" --dry-run
  expect_out "reduction:         exact: the GPUs' gradients summed as integers in an order of the GPUs"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/fast"
  expect_out "dist.reduction = \"fast\": the backend's allreduce overlapping backward; the sum's rounding depends"
  [ "$(grep -c 'dist.reduction = ' "$tmp/out")" = 1 ] || fail "the reduction's line was not said once"
  # Two ranks emulating a world of 8: the emulation is said once for the run, not per rank.
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --set dist.world_size=8 --set dist.batch_per_gpu=2 \
    --set data.params.train_clips=32 --set run.epochs=1 --out "$tmp/emulated"
  [ "$(grep -c 'emulating 8 GPUs on 2 rank(s)' "$tmp/out")" = 1 ] || { cat "$tmp/out"; fail "the emulation was not said once"; }
  # Compression applies to the fast reduction only.
  expect_rc 2 -- "$vexp" check $R --set dist.reduction=\"exact\" --set dist.compression=\"fp16\"
  expect_out "dist.compression = \"fp16\" compresses what the fast reduction sends, and dist.reduction is \"exact\""
  ;;
parity_2rank_vs_emulated)
  # Same clips per step, same dropout per GPU: 2 ranks == 1 rank emulating 2 GPUs,
  # also in the steps that cross an epoch's end (88 clips: 5.5 steps per epoch). The
  # fast reduction (the default) is tested here: two summands add alike in either order.
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/two"
  expect_out "top-1"
  expect_rc 0 -- "$vexp" run $R --set dist.backend=local --out "$tmp/one"
  expect_out "emulating 2 GPUs on 1 rank(s): 2 micro-batches of 8 clips per step"
  same_params "$tmp/two" "$tmp/one" curve
  # BatchNorm statistics as well: the emulated GPU 1's micro-batches leave rank 0's alone,
  # as on the real 2 ranks, so buffers, optimizer state and top-1 are bit-identical.
  same_state "$tmp/two" "$tmp/one"
  $PY - "$tmp/two/metrics.jsonl" <<'PY' || fail "no overlap recorded"
import json, sys
steps = [j for j in map(json.loads, open(sys.argv[1])) if j["type"] == "step"]
assert all(j["ranks"] == 2 and j["buckets"] >= 3 for j in steps), steps[0]
# Buckets launched from backward hooks, before backward ended.
assert all(j["buckets_in_backward"] >= j["buckets"] - 1 for j in steps), steps[0]
print("buckets per step", steps[0]["buckets"], "launched during backward", steps[0]["buckets_in_backward"])
PY
  [ ! -e "$tmp/two/failures" ] || fail "failures reported by a good run"
  ;;
mixup_2rank_vs_emulated)
  # Batch transforms (mixup, then cutmix on shuffled partners) and label smoothing:
  # each micro-batch's draws are keyed by (seed, step, GPU), so 2 ranks equal 1 rank
  # emulating 2, bit for bit (parameters, BatchNorm buffers, optimizer state, top-1),
  # and a run resumed on the other rank count ends the same.
  { printf 'extends = "%s"\n' "$here/$R"
    printf '%s\n' '[loss]' 'type = "label_smoothing"' 'smoothing = 0.1' '' \
      '[[data.batch_transforms]]' 'type = "mixup"' 'alpha = 0.4' '' \
      '[[data.batch_transforms]]' 'type = "cutmix"' 'pairing = "shuffle"' 'prob = 0.7'; } >"$tmp/mix.toml"
  M=$tmp/mix.toml
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $M --out "$tmp/two"
  expect_out "top-1"
  expect_rc 0 -- "$vexp" run $M --set dist.backend=local --out "$tmp/one"
  expect_out "emulating 2 GPUs on 1 rank(s): 2 micro-batches of 8 clips per step"
  same_params "$tmp/two" "$tmp/one" curve
  same_state "$tmp/two" "$tmp/one"
  expect_rc 0 -- "$vexp" run $M --out "$tmp/up" --stop-after 1
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $M --out "$tmp/up" --resume
  expect_out "resuming"
  same_state "$tmp/two" "$tmp/up"
  ;;
parity_2rank_vs_emulated_transforms)
  # The clip transforms draw from (run.seed, epoch, clip) alone: with random resized
  # crops, flips, colour jitter, grayscale and RandAugment in the loader threads (and a
  # 3-crop test), 2 ranks == 1 rank emulating 2 GPUs, bit for bit, and a run stopped on
  # 2 ranks and resumed on 1 ends as the uninterrupted one.
  A=data/tiny_dist_aug.toml
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $A --out "$tmp/two"
  expect_out "top-1"
  expect_rc 0 -- "$vexp" run $A --set dist.backend=local --out "$tmp/one"
  expect_out "emulating 2 GPUs on 1 rank(s)"
  grep -q 'type = "rand_augment"' "$tmp/one/resolved.toml" || fail "the run did not take the recipe's transforms"
  same_state "$tmp/two" "$tmp/one"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $A --out "$tmp/down" --stop-after 1
  expect_rc 0 -- "$vexp" run $A --out "$tmp/down" --resume
  expect_out "resuming"
  same_state "$tmp/two" "$tmp/down"
  ;;
hooks_2rank_vs_emulated)
  # The ema hook (and so any hook) on 2 ranks equals 1 rank emulating 2 GPUs: the
  # averaged weights beside every checkpoint, the ema figures of every evaluation, and
  # the trained state, bit for bit; so does a run started on 2 ranks and resumed on 1.
  printf 'extends = "%s"\n[[hooks]]\ntype = "ema"\ndecay = 0.9\nwarmup = true\n' "$here/$R" > "$tmp/ema.toml"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run "$tmp/ema.toml" --out "$tmp/two"
  expect_out "ema_top1"
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --set dist.backend=local --out "$tmp/one"
  expect_out "emulating 2 GPUs on 1 rank(s)"
  same_state "$tmp/two" "$tmp/one"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run "$tmp/ema.toml" --out "$tmp/down" --stop-after 1
  expect_rc 0 -- "$vexp" run "$tmp/ema.toml" --out "$tmp/down" --resume
  expect_out "resuming"
  same_ema "$tmp/two" "$tmp/one" "$tmp/down"
  ;;
parity_2rank_vs_emulated_adamw)
  # AdamW (the optimizers plugin): 2 ranks == 1 rank emulating 2 GPUs, bit for bit
  # (parameters, BatchNorm buffers, the moments and step counts, every logged loss),
  # and a run started on 1 rank and resumed on 2 (rank 0's moments broadcast) as well.
  A=data/tiny_dist_adamw.toml
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $A --out "$tmp/two"
  expect_rc 0 -- "$vexp" run $A --set dist.backend=local --out "$tmp/one"
  expect_out "emulating 2 GPUs on 1 rank(s): 2 micro-batches of 8 clips per step"
  same_params "$tmp/two" "$tmp/one" curve
  same_state "$tmp/two" "$tmp/one"
  $PY - "$tmp/two" <<'PY' || fail "no AdamW state in the checkpoint"
import glob, sys, torch
c = torch.load(sorted(glob.glob(sys.argv[1] + "/checkpoints/epoch_*.pt"))[-1], weights_only=True)
keys = sorted(c["optimizer"])
assert any(k.startswith("exp_avg_sq/") for k in keys) and any(k.startswith("step/") for k in keys), keys[:5]
PY
  expect_rc 0 -- "$vexp" run $A --out "$tmp/up" --stop-after 1
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $A --out "$tmp/up" --resume
  expect_out "resuming"
  same_state "$tmp/two" "$tmp/up"
  ;;
all_in_2rank_vs_emulated)
  # Every kind of training plugin at once (tiny_dist_all_in.toml: AdamW with a
  # parameter group, label smoothing over mixup / cutmix, clip transforms with
  # RandAugment and a 3-crop test, the ema hook): 2 ranks == 1 rank emulating 2 GPUs,
  # bit for bit (parameters, buffers, optimizer moments, top-1, the averaged weights
  # and their figures), and so does a run stopped on 2 ranks and resumed on 1.
  A=data/tiny_dist_all_in.toml
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $A --out "$tmp/two"
  expect_out "ema_top1"
  expect_rc 0 -- "$vexp" run $A --set dist.backend=local --out "$tmp/one"
  expect_out "emulating 2 GPUs on 1 rank(s): 2 micro-batches of 8 clips per step"
  for k in 'type = "adamw"' 'type = "label_smoothing"' 'type = "mixup_cutmix"' 'type = "rand_augment"' \
           'type = "test_crops"' 'type = "ema"' 'name = "head"'; do
    grep -qF "$k" "$tmp/one/resolved.toml" || fail "resolved.toml lacks $k"
  done
  same_state "$tmp/two" "$tmp/one"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $A --out "$tmp/down" --stop-after 1
  expect_rc 0 -- "$vexp" run $A --out "$tmp/down" --resume
  expect_out "resuming"
  same_state "$tmp/two" "$tmp/down"
  same_ema "$tmp/two" "$tmp/one" "$tmp/down"
  $PY - "$tmp/two" <<'PY' || fail "the all-in run's optimizer is not AdamW"
import glob, os, sys, torch
# The optimizer is AdamW (moments per parameter).
opt = torch.load(sorted(f for f in glob.glob(sys.argv[1] + "/checkpoints/epoch_*.pt") if os.path.basename(f).count(".") == 1)[-1],
                 weights_only=True)["optimizer"]
assert any(k.startswith("exp_avg_sq/") for k in opt), list(opt)[:5]
PY
  ;;
resume_on_other_ranks)
  # A run started on 2 ranks and resumed on 1 rank emulating 2 (a requeued job granted
  # fewer nodes), and one started on 1 and resumed on 2: both end bit-identical to the
  # uninterrupted 2-rank run (parameters, BatchNorm buffers, optimizer state, top-1).
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/two"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/down" --stop-after 1
  # The same command without a launcher: the mpi backend runs one rank, emulating 2.
  expect_rc 0 -- "$vexp" run $R --out "$tmp/down" --resume
  expect_out "emulating 2 GPUs on 1 rank(s)"
  expect_out "resuming"
  same_state "$tmp/two" "$tmp/down"
  expect_rc 0 -- "$vexp" run $R --out "$tmp/up" --stop-after 1
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/up" --resume
  expect_out "resuming"
  same_state "$tmp/two" "$tmp/up"
  # provenance.jsonl: one record per invocation, each with its own ranks, hosts and launcher
  $PY - "$tmp/down" "$tmp/up" <<'PY' || fail "bad provenance of the requeued runs"
import json, socket, sys
for d, ranks in ((sys.argv[1], [2, 1]), (sys.argv[2], [1, 2])):
    recs = [json.loads(l) for l in open(d + "/provenance.jsonl")]
    assert [r["ranks"] for r in recs] == ranks and [r["outcome"] for r in recs] == ["stopped", "finished"], recs
    for r in recs:
        assert r["hosts"] == [socket.gethostname()] * r["ranks"], r["hosts"]
        assert ("mpirun" in r["launcher"]) == (r["ranks"] == 2), r["launcher"]
        assert r["comm"] == "mpi" and r["libraries"]["mpi"].startswith("libmpi"), r["libraries"]
PY
  # A requeue of the finished run (--resume auto on 2 ranks, then --resume on 1): every
  # rank agrees it is done, exits 0 and nothing in the directory changes.
  snapshot() { (cd "$1" && find . -type f ! -name .vexp.lock -printf '%p %s %T@\n' | sort && cat summary.json provenance.jsonl metrics.jsonl); }
  snapshot "$tmp/up" >"$tmp/up.before"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/up" --resume auto
  expect_out "holds this recipe's finished run (summary.json): nothing to train, nothing rewritten"
  expect_out "already finished"
  expect_no_out "resuming"
  expect_rc 0 -- "$vexp" run $R --out "$tmp/up" --resume
  expect_out "already finished"
  snapshot "$tmp/up" | cmp -s - "$tmp/up.before" || fail "resuming the finished run changed its directory"
  # With accumulation (2 micro-batches per GPU) the fast reduction's emulated rank sums
  # a step's four micro-batches in another order than the allreduce of two: equal to
  # float rounding (docs/distributed.md gives the bound); BatchNorm follows GPU 0's two
  # micro-batches. The exact reduction: bit-identical.
  A=(--set dist.accum_steps=2 --set dist.batch_per_gpu=4 --set data.params.train_clips=32)   # 2 steps per epoch
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${A[@]}" --out "$tmp/two_acc"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${A[@]}" --out "$tmp/down_acc" --stop-after 1
  expect_rc 0 -- "$vexp" run $R "${A[@]}" --out "$tmp/down_acc" --resume
  expect_out "resuming"
  same_state "$tmp/two_acc" "$tmp/down_acc" 1e-5
  X=("${A[@]}" --set dist.reduction=\"exact\")
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${X[@]}" --out "$tmp/two_x"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${X[@]}" --out "$tmp/down_x" --stop-after 1
  expect_rc 0 -- "$vexp" run $R "${X[@]}" --out "$tmp/down_x" --resume
  same_state "$tmp/two_x" "$tmp/down_x"
  ;;
nproc_launch)
  expect_rc 0 -- "$vexp" run $R --set dist.backend=local --nproc 2 --out "$tmp/n"
  expect_out "starting 2 local ranks with mpirun"
  grep -q '"ranks":2' "$tmp/n/metrics.jsonl" || fail "not 2 ranks"
  ;;
mismatched_recipe)
  # Rank 1 gets one more --set through a shell, not an MPMD line (-np 1 A : -np 1 B):
  # Open MPI 5.0.7's mpirun (Debian trixie) crashes on any MPMD line, even `echo`.
  expect_fail timeout 120 "${MPI[@]}" -np 2 /bin/sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$0" "$@" --set optim.momentum=0.8; else exec "$0" "$@"; fi' \
    "$vexp" run $R --out "$tmp/m"
  expect_out "rank 1 runs a different recipe than rank 0"
  no_crash
  ;;
hung_rank)
  # Rank 1 stops (SIGSTOP) after the first checkpoint: rank 0's watchdog names it.
  "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/h" --set dist.timeout_s=3 --set run.epochs=4 >"$tmp/out" 2>&1 &
  bg=$!
  wait_for_file "$tmp/h/checkpoints/epoch_0001.pt" 120 || { cat "$tmp/out"; fail "no first checkpoint"; }
  r1=$(rank_pid $bg 1); [ -n "$r1" ] || fail "rank 1 not found"
  kill -STOP "$r1"
  start=$SECONDS
  wait $bg; rc=$?; bg=""
  kill -9 "$r1" 2>/dev/null
  [ "$rc" -ne 0 ] || fail "the job exited 0"
  [ $((SECONDS - start)) -le 60 ] || fail "took $((SECONDS - start)) s to notice"
  expect_out "rank 1 does not respond (died or hangs)"
  grep -q "rank 1 does not respond" "$tmp/h/failures/rank_0.txt" || fail "not reported in the run directory"
  $PY -c "import torch,sys; torch.load(sys.argv[1], weights_only=True)" "$tmp/h/checkpoints/epoch_0001.pt" || fail "checkpoint unreadable"
  ;;
killed_rank_and_resume)
  # The uninterrupted run ...
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/full" --set run.epochs=4
  # ... and one whose rank 1 is killed after the first checkpoint, then resumed.
  "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/k" --set run.epochs=4 >"$tmp/out" 2>&1 &
  bg=$!
  wait_for_file "$tmp/k/checkpoints/epoch_0001.pt" 120 || { cat "$tmp/out"; fail "no first checkpoint"; }
  r1=$(rank_pid $bg 1); [ -n "$r1" ] || fail "rank 1 not found"
  kill -9 "$r1"
  start=$SECONDS
  wait $bg; rc=$?; bg=""
  [ "$rc" -ne 0 ] || fail "the job exited 0 after a rank was killed"
  [ $((SECONDS - start)) -le 60 ] || fail "took $((SECONDS - start)) s to stop"
  expect_out "rank 1"
  no_crash
  [ ! -e "$tmp/k/summary.json" ] || fail "a killed run wrote a summary"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R --out "$tmp/k" --set run.epochs=4 --resume
  expect_out "resuming"
  same_params "$tmp/full" "$tmp/k" curve
  ;;
interrupt_nproc)
  # Ctrl-C on `vexp run --nproc 2`: every rank stops after the same step, rank 0
  # writes a checkpoint, exit 130 with the command that continues; that command ends
  # where an uninterrupted run ends. A stale failure record of an earlier invocation
  # is set aside by the next one.
  S=(--set run.epochs=2 --set data.params.train_clips=184)   # 11.5 steps per epoch (12 + 11), logged each
  expect_rc 0 -- "$vexp" run $R "${S[@]}" --nproc 2 --out "$tmp/full"
  "$vexp" run $R "${S[@]}" --nproc 2 --out "$tmp/i" >"$tmp/out" 2>&1 &
  bg=$!
  for _ in $(seq 1 2400); do
    grep -q '"global_step":3,' "$tmp/i/metrics.jsonl" 2>/dev/null && break
    kill -0 $bg 2>/dev/null || break
    sleep 0.05
  done
  grep -q '"global_step":3,' "$tmp/i/metrics.jsonl" || { cat "$tmp/out"; fail "the run did not reach step 3"; }
  kill -INT $bg
  wait $bg; rc=$?; bg=""
  [ "$rc" -eq 130 ] || { cat "$tmp/out"; fail "interrupted run exited $rc, expected 130"; }
  no_crash
  expect_out "checkpoint written: $tmp/i/checkpoints/epoch_"
  grep -q "^vexp: to continue: .* --nproc 2 --out $tmp/i --resume\$" "$tmp/out" || { cat "$tmp/out"; fail "no resume command"; }
  [ "$(grep -c "to continue" "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "more than one rank printed the resume command"; }
  ls "$tmp/i/checkpoints/"epoch_*_step_*.pt >/dev/null 2>&1 || fail "no mid-epoch checkpoint"
  [ ! -e "$tmp/i/failures" ] || { cat "$tmp/i/failures"/*; fail "an interruption recorded failures"; }
  # a failure record left by an earlier (failed) start
  mkdir -p "$tmp/i/failures"; echo "earlier failure" >"$tmp/i/failures/rank_1.txt"; touch -d '1 hour ago' "$tmp/i/failures/rank_1.txt"
  resume=$(sed -n 's/^vexp: to continue: //p' "$tmp/out")
  eval "$resume" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "'$resume' failed"; }
  expect_out "resuming"
  same_params "$tmp/full" "$tmp/i" curve
  [ -z "$(ls "$tmp/i/failures/"*.txt 2>/dev/null)" ] || fail "a successful run's directory holds current failure records"
  [ -e "$tmp/i/failures/previous/rank_1.txt" ] || fail "the earlier failure record was not kept in failures/previous/"
  ;;
noise_2rank_vs_emulated)
  # The gradient noise scale (run.noise_scale_every, docs/batch-size.md) is the same
  # whether a GPU is a rank or emulated: 2 ranks == 1 rank emulating 2, with the fast
  # reduction (to float rounding: an emulated GPU's gradient is a difference of a float
  # sum), with accum_steps = 2 (a GPU's step is the small batch), and bit for bit with
  # the exact reduction; measuring leaves training as it was (bit-identical states).
  N=(--set run.noise_scale_every=2)
  N1=(--set run.noise_scale_every=1)
  same_noise() {  # same_noise A B TOL [FIRST]: the noise keys of every measured step (FIRST: the first's tolerance)
    $PY - "$1" "$2" "$3" "${4:-$3}" <<'PY' || fail "the noise figures of $1 and $2 differ"
import json, sys
a, b, tol_all, first = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
def noise(d):
    return [j for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "step" and "noise_big_batch" in j]
na, nb = noise(a), noise(b)
assert [j["global_step"] for j in na] == [j["global_step"] for j in nb] and len(na) >= 4, (len(na), len(nb))
assert na[0]["global_step"] in (1, 2), na[0]
worst = 0.0
for i, (x, y) in enumerate(zip(na, nb)):
    tol = first if i == 0 else tol_all
    assert x["noise_small_batch"] == y["noise_small_batch"] and x["noise_big_batch"] == y["noise_big_batch"], (x, y)
    # Differences relative to the terms the estimates are made of.
    s = max(abs(x["noise_small_sq"]), abs(y["noise_small_sq"]))
    scale = {"noise_small_sq": s, "noise_big_sq": s, "noise_g2_step": s, "noise_g2": s,
             "noise_trace_step": s * x["noise_small_batch"], "noise_trace": s * x["noise_small_batch"]}
    for k, m in scale.items():
        d = abs(x[k] - y[k]) / m
        worst = max(worst, d)
        assert d <= tol, (k, x["global_step"], x[k], y[k], d)
    if tol == 0:
        assert x["noise_scale"] == y["noise_scale"], (x, y)
    elif x["noise_scale"] is not None or y["noise_scale"] is not None:
        assert abs(x["noise_scale"] - y["noise_scale"]) <= max(1e-3, 5 * tol) * abs(x["noise_scale"]), (x, y)
print(f"{len(na)} measured steps, B_small {na[0]['noise_small_batch']}, B_big {na[0]['noise_big_batch']}, "
      f"largest relative difference {worst:.3g}, last B_noise {na[-1]['noise_scale']} / {nb[-1]['noise_scale']}")
PY
  }
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${N[@]}" --out "$tmp/two"
  expect_rc 0 -- "$vexp" run $R "${N[@]}" --set dist.backend=local --out "$tmp/one"
  expect_out "emulating 2 GPUs on 1 rank(s)"
  same_noise "$tmp/two" "$tmp/one" 1e-5
  same_state "$tmp/two" "$tmp/one"
  # Measuring changes no step: the emulated run without it ends bit-identical.
  expect_rc 0 -- "$vexp" run $R --set dist.backend=local --out "$tmp/unmeasured"
  same_state "$tmp/one" "$tmp/unmeasured"
  # accum_steps = 2: each GPU's 2 micro-batches of 4 make its step of 8 clips. The fast
  # reduction then sums 4 micro-batches in a different order on 1 rank than on 2, so
  # the weights themselves drift apart by rounding from the first update on (chaotically:
  # a few per cent by step 10): measured from step 1, the first measurement (the same weights)
  # agrees to float rounding; the later ones are only checked for their presence.
  A=(--set dist.accum_steps=2 --set dist.batch_per_gpu=4)
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${N1[@]}" "${A[@]}" --out "$tmp/two_acc"
  expect_rc 0 -- "$vexp" run $R "${N1[@]}" "${A[@]}" --set dist.backend=local --out "$tmp/one_acc"
  same_noise "$tmp/two_acc" "$tmp/one_acc" 1 1e-5
  # dist.compression = "fp16" casts what goes on the wire: the GPUs' norms are the local
  # fp32 gradients' (the first measurement, on the same weights, equals the uncompressed
  # run's to rounding); the global one is the reduced gradient the optimizer gets (fp16
  # rounding of its elements: the same norm to 1e-3).
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${N1[@]}" --set run.epochs=1 --out "$tmp/two_1"
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${N1[@]}" --set run.epochs=1 --set dist.compression=\"fp16\" \
    --out "$tmp/two_fp16"
  $PY - "$tmp/two_1" "$tmp/two_fp16" <<'PY' || fail "compression changed the GPUs' noise norms"
import json, sys
a, b = ([j for j in map(json.loads, open(d + "/metrics.jsonl")) if "noise_big_batch" in j][0] for d in sys.argv[1:])
assert a["global_step"] == b["global_step"] == 1, (a, b)
ds = abs(a["noise_small_sq"] - b["noise_small_sq"]) / a["noise_small_sq"]
db = abs(a["noise_big_sq"] - b["noise_big_sq"]) / a["noise_big_sq"]
print(f"fp16 wire, step 1: GPUs' norms relative difference {ds:.3g}, global {db:.3g}")
assert ds <= 1e-9 and db <= 1e-3, (ds, db)
PY
  # The exact reduction: every GPU's own gradient, summed in the GPUs' order: bit for bit.
  X=(--set dist.reduction=\"exact\")
  expect_rc 0 -- "${MPI[@]}" -np 2 "$vexp" run $R "${N[@]}" "${A[@]}" "${X[@]}" --out "$tmp/two_exact"
  expect_rc 0 -- "$vexp" run $R "${N[@]}" "${A[@]}" "${X[@]}" --set dist.backend=local --out "$tmp/one_exact"
  same_noise "$tmp/two_exact" "$tmp/one_exact" 0
  same_state "$tmp/two_exact" "$tmp/one_exact"
  ;;
*) fail "unknown test $name" ;;
esac
echo "ok [$name]"
