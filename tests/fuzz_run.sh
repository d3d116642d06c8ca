#!/usr/bin/env bash
# One bounded libFuzzer session, as ctest (-L fuzz) and `make fuzz` run it:
#   fuzz_run.sh FUZZER SEED_CORPUS WORK_DIR
# Runs FUZZER for VEXP_FUZZ_SECONDS (default 20) from the seed corpus in the tree plus
# what earlier sessions found (WORK_DIR/corpus); fails on a crash, a sanitizer report,
# a timeout or an out-of-memory, leaving the input in WORK_DIR/artifacts.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3
seconds=${VEXP_FUZZ_SECONDS:-20}
mkdir -p "$work/corpus" "$work/artifacts"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -seed=1 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds"
