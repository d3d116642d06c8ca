#!/usr/bin/env bash
# The README's main demo: train TSM and TSN on synthetic motion, then compare.
set -euo pipefail
build=${1:-build}
vexp="$build/bin/vexp"
out="runs/demo/$(date +%Y%m%d-%H%M%S)"
start=$(date +%s)
for recipe in tsm_motion tsn_motion; do
  echo "== vexp run recipes/quickstart/$recipe.toml"
  "$vexp" run "recipes/quickstart/$recipe.toml" --out "$out/$recipe"
done
echo
"$vexp" compare "$out/tsm_motion" "$out/tsn_motion"
echo
echo "demo finished in $(( $(date +%s) - start )) s; run directories under $out"
