#!/usr/bin/env bash
# The rank-count equality table of docs/distributed.md ("Exact on any rank count"):
# the tiny distributed recipe (tests/dist/data/tiny_dist.toml) with dist.world_size = 8
# trained for EPOCHS epochs on 1, 2, 4 and 8 ranks (mpirun), with accum_steps 1 and 2,
# under one dist.reduction; for each, the max |difference| of the parameters, the
# optimizer state and the BatchNorm buffers of the last checkpoint against the 1-rank
# run, and whether the logged losses and top-1 are equal. Also a run moved mid-way
# (8 ranks for the first epoch, 2 for the rest: a requeue onto fewer nodes).
#
#   tools/bench/rank_counts.sh VEXP [exact|fast] [EPOCHS] [--expect-equal]
#
# With --expect-equal it exits 1 unless every row is bit-identical (tests/dist:
# dist.exact_any_rank_count). Prints a Markdown table.
set -uo pipefail
vexp=${1:?usage: rank_counts.sh VEXP [exact|fast] [EPOCHS] [--expect-equal]}
reduction=${2:-exact}
epochs=${3:-3}
expect=${4:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
mpirun=$(command -v mpirun) || { echo "rank_counts.sh: mpirun is not on PATH" >&2; exit 1; }
MPI=("$mpirun" --allow-run-as-root --oversubscribe --bind-to none)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vexp_rank_counts_XXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
R=$src/tests/dist/data/tiny_dist.toml
run() {  # run RANKS OUT [ARGS...]
  local n=$1 out=$2
  shift 2
  local cmd=("$vexp")
  [ "$n" -gt 1 ] && cmd=("${MPI[@]}" -np "$n" "$vexp")
  "${cmd[@]}" run "$R" "${A[@]}" --out "$out" "$@" >"$out.log" 2>&1 ||
    { cat "$out.log" >&2; echo "rank_counts.sh: the run on $n rank(s) failed" >&2; exit 1; }
}
rows=()
for acc in 1 2; do
  A=(--set dist.world_size=8 --set "dist.batch_per_gpu=$((2 / acc))" --set "dist.accum_steps=$acc"
     --set data.params.train_clips=64 --set "run.epochs=$epochs" --set "dist.reduction=\"$reduction\"")
  for n in 1 2 4 8; do run "$n" "$tmp/a${acc}_r$n"; done
  run 8 "$tmp/a${acc}_moved" --stop-after 1
  run 2 "$tmp/a${acc}_moved" --resume
  for n in 2 4 8 moved; do rows+=("$acc $n $tmp/a${acc}_r1 $tmp/a${acc}_${n/#[0-9]/r$n}"); done
done
$PY - "$reduction" "$epochs" "$expect" "${rows[@]}" <<'PY'
import glob, json, sys, torch
reduction, epochs, expect, rows = sys.argv[1], sys.argv[2], sys.argv[3] == "--expect-equal", sys.argv[4:]
def last(d): return torch.load(sorted(glob.glob(d + "/checkpoints/epoch_*.pt"))[-1], weights_only=True)
def tensors(x, prefix=""):
    if isinstance(x, torch.Tensor):
        yield prefix, x
    elif isinstance(x, dict):
        for k, v in x.items(): yield from tensors(v, prefix + "." + str(k))
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x): yield from tensors(v, prefix + "." + str(i))
def maxdiff(a, b, keep):
    ta, tb = dict(tensors(a)), dict(tensors(b))
    assert ta.keys() == tb.keys(), "the checkpoints hold different entries"
    return max([(ta[k].double() - tb[k].double()).abs().max().item() for k in ta if keep(k) and ta[k].numel()] or [0.0])
bn = ("running_mean", "running_var", "num_batches_tracked")
def losses(d): return [j["loss"] for j in map(json.loads, open(d + "/metrics.jsonl")) if j["type"] == "step"]
def top1(d): return json.load(open(d + "/summary.json"))["top1"]
print(f"dist.reduction = \"{reduction}\", world 8, {epochs} epochs: max |difference| against the 1-rank run")
print()
print("| accum | ranks | parameters | optimizer state | BatchNorm buffers | losses equal | top-1 equal |")
print("|---|---|---|---|---|---|---|")
ok = True
for row in rows:
    acc, n, a, b = row.split(" ")
    ca, cb = last(a), last(b)
    p = maxdiff(ca["model"], cb["model"], lambda k: not k.endswith(bn))
    o = maxdiff(ca["optimizer"], cb["optimizer"], lambda k: True)
    q = maxdiff(ca["model"], cb["model"], lambda k: k.endswith(bn))
    le, te = losses(a) == losses(b), top1(a) == top1(b)
    ok = ok and p == 0 and o == 0 and q == 0 and le and te
    label = "8 then 2 (moved)" if n == "moved" else n
    print(f"| {acc} | {label} | {p:.3g} | {o:.3g} | {q:.3g} | {'yes' if le else 'no'} | {'yes' if te else 'no'} |")
if expect and not ok:
    print("rank_counts.sh: not bit-identical on every rank count", file=sys.stderr)
    sys.exit(1)
PY
