#!/usr/bin/env bash
# The README's main demo: train TSM and TSN on synthetic motion, then compare (the
# table, then one line: how long it took and where the runs and their provenance are).
# The two runs train side by side, each on its share of the cores: these tiny
# models (8-64 channels on 32x32 frames) gain little from a second intra-op thread
# (about 1.2x), so two one-thread runs finish in ~0.65 of the time of two
# two-thread runs one after the other (measured on the 2-core CI machine).
set -euo pipefail
build=${1:-build}
vexp="$build/bin/vexp"
out="runs/demo/$(date +%Y%m%d-%H%M%S)"
cores=$(nproc)
threads=$(( cores >= 2 ? cores / 2 : 1 ))
start=$(date +%s)
mkdir -p "$out"
pids=()
for recipe in tsm_motion tsn_motion; do
  echo "== vexp run recipes/quickstart/$recipe.toml --set run.threads=$threads  (log: $out/$recipe.log)"
  "$vexp" run "recipes/quickstart/$recipe.toml" --out "$out/$recipe" --set "run.threads=$threads" \
    >"$out/$recipe.log" 2>&1 &
  pids+=($!)
done
# Ctrl-C stops both runs (each writes a checkpoint and says how to resume).
trap 'kill -INT "${pids[@]}" 2>/dev/null; wait; exit 130' INT TERM
failed=0
i=0
for recipe in tsm_motion tsn_motion; do
  if wait "${pids[$i]}"; then
    tail -n 1 "$out/$recipe.log"
  else
    rc=$?
    echo "vexp run recipes/quickstart/$recipe.toml failed (exit $rc); its log, $out/$recipe.log, ends with:" >&2
    tail -n 20 "$out/$recipe.log" >&2
    failed=1
  fi
  i=$((i + 1))
done
[ "$failed" -eq 0 ] || exit 1
echo
# The table alone: the provenance difference of the two runs (recipe paths and hashes,
# the command lines, ~25 lines) would bury it; the last line says where it is.
"$vexp" compare --no-provenance "$out/tsm_motion" "$out/tsn_motion"
echo
echo "demo finished in $(( $(date +%s) - start )) s; runs and their provenance: $out/{tsm_motion,tsn_motion}" \
  "($vexp compare $out/tsm_motion $out/tsn_motion shows every difference)"
