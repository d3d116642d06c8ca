#!/usr/bin/env bash
# GPU build and benchmarks, for a machine with an NVIDIA GPU, nvcc, NCCL and a CUDA
# PyTorch (its libtorch is what vexp builds against). From the repository root:
#
#   tools/bench/gpu.sh [BUILD_DIR]       (default build-cuda)
#   DRY_RUN=1 tools/bench/gpu.sh         (no GPU needed: prints every command it would run)
#
# Fits in 8 minutes on a 16-core H200 machine (each step has a time limit; a step
# that runs out is reported and the script goes on):
#   1. configure with -DVEXP_CUDA=ON against `torch.utils.cmake_prefix_path`, build
#      `vexp` (and so every plugin, comm/nccl included) and the kernel test only;
#   2. the CUDA shift kernel's test against its host reference (ctest -L cuda), and a
#      tiny `vexp run` on the GPU in bf16 and in fp16 (dynamic loss scaling): the
#      trainer's device path, checkpoints saved as CPU tensors, the result files;
#   3. `vexp bench op temporal_shift --device cuda`, fp32 and bf16, NCHW and
#      channels-last: the kernel's GB/s against a device copy of the same tensor;
#   4. `vexp bench train --synthetic --device cuda --precision bf16 --channels-last`
#      on TSM-R50 8x224^2, TSN-R50 8x224^2, I3D-R50 3x3x3 and 3x1x1 32x224^2,
#      8 clips per step: clips/s (host->device copies included, overlapped);
#   5. the PyTorch reference (cpu_vs_pytorch.py's worker) on the same GPU: TSM and TSN,
#      bf16 autocast, channels-last, 8 clips x 8 x 224^2 (its clips stay on the GPU);
#   6. `vexp bench allreduce --backend nccl` with one process per visible GPU
#      (RANK / WORLD_SIZE / LOCAL_RANK, a rendezvous file): 256 MiB, algbw and busbw;
#   7. a summary: vexp TSM / PyTorch TSM (goal >= 1.1), TSM / I3D clips/s (the
#      paper: 1.8), shift forward / copy bandwidth (goal >= 0.8).
# Raw JSON results go to BUILD_DIR/gpu-bench/.
set -uo pipefail
build=${1:-build-cuda}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
dry=${DRY_RUN:-0}
budget=${BUDGET_S:-470}   # seconds for the whole script
t0=$SECONDS
out="$build/gpu-bench"
mkdir -p "$out"
exec 3>&1   # the terminal, for dry-run lines of steps whose output goes to a file
vexp="$build/bin/vexp"

left() { echo $((budget - (SECONDS - t0))); }
real() { [ "$dry" != 1 ]; }  # false in a dry run: the results to print do not exist
# step LIMIT_S NAME cmd...: runs cmd with a time limit (never past the budget);
# in a dry run prints it instead.
step() {
  local limit=$1 name=$2; shift 2
  local l; l=$(left)
  [ "$limit" -gt "$l" ] && limit=$l
  if [ "$dry" = 1 ]; then { printf '[dry] %s (limit %ss):' "$name" "$limit"; printf ' %q' "$@"; echo; } >&3; return 0; fi
  # Status lines go to fd 3 (the terminal): stdout may be a result file.
  if [ "$limit" -le 5 ]; then echo "== $name: skipped, the time budget is spent" >&3; return 1; fi
  timeout --signal=TERM --kill-after=5 "$limit" "$@"
  local rc=$?
  [ $rc -eq 124 ] && echo "== $name: stopped after its ${limit} s limit" >&3
  [ $rc -ne 0 ] && echo "== $name: failed ($rc)" >&3
  return $rc
}

if [ "$dry" = 1 ]; then
  prefix=/path/from/torch.utils.cmake_prefix_path
  gpus=${DRY_GPUS:-1}
else
  "$py" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device visible to PyTorch"; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0), "x", torch.cuda.device_count())' || exit 1
  prefix=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())')
  # comm/nccl needs nccl.h and libnccl: a pip-installed PyTorch has them in nvidia-nccl.
  if [ -z "${NCCL_HOME:-}" ] && [ ! -e /usr/include/nccl.h ]; then
    NCCL_HOME=$("$py" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) && export NCCL_HOME \
      && echo "NCCL_HOME=$NCCL_HOME (from the nvidia-nccl wheel)"
  fi
fi
jobs=$(nproc)

echo "== 1. build ($build)"
step 60 configure cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DVEXP_CUDA=ON -DVEXP_BUILD_TESTS=ON \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >"$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log"; exit 1; }
step 330 build cmake --build "$build" -j"$jobs" --target vexp test_temporal_shift_cuda >"$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
echo "   built in $((SECONDS - t0)) s"

echo "== 2. correctness on the GPU"
step 60 kernel-test ctest --test-dir "$build" -L cuda --output-on-failure
for prec in bf16 fp16; do
  rm -rf "$out/run_$prec"
  if step 60 "run-$prec" "$vexp" run tests/cli/data/tiny.toml --out "$out/run_$prec" \
       --set run.device=cuda --set run.precision=$prec --set run.progress=none >"$out/run_$prec.log" 2>&1; then
    real && "$py" - "$out/run_$prec" $prec <<'PY'
import json, sys, torch
d, prec = sys.argv[1], sys.argv[2]
s = json.load(open(d + "/summary.json"))
assert s["device"].startswith("cuda") and s["precision"] == prec, s
ck = torch.load(d + "/checkpoints/epoch_0002.pt", map_location=None)  # no map_location: must be CPU tensors
assert all(t.device.type == "cpu" for t in ck["model"].values()), "checkpoint holds GPU tensors"
print("   vexp run tiny.toml on %s, %s: top-1 %.3f, %d step(s) skipped, checkpoint on the CPU" % (s["device"], prec, s["top1"], s["skipped_steps"]))
PY
  else
    tail -5 "$out/run_$prec.log"
  fi
done

echo "== 3. temporal shift kernel vs device copy, [64,256,56,56] (8 clips x 8 frames)"
for dt in float bfloat16; do
  for cl in "" --channels-last; do
    step 30 "op-$dt$cl" "$vexp" bench op temporal_shift --device cuda --shape 64x256x56x56 --frames 8 --dtype $dt $cl \
      --reps 50 --json >"$out/op_${dt}${cl}.json" && real && \
      "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("   %-9s %-14s copy %7.1f GB/s  shift fwd %7.1f GB/s (%.2f of copy)  fwd+bwd %.2f of copy" % (r["dtype"], "channels-last" if r["channels_last"] else "NCHW", r["copy"]["gb_per_s"], r["forward"]["gb_per_s"], r["forward_vs_copy"], r["forward_backward_vs_copy"]))' "$out/op_${dt}${cl}.json" 2>/dev/null
  done
done

echo "== 4. vexp training step on the GPU (synthetic clips, bf16 autocast, channels-last, 8 clips per step)"
declare -A recipe=([tsm]=recipes/kinetics400/tsm_r50_8f.toml [tsn]=recipes/kinetics400/tsn_r50_8f.toml
                   [i3d333]=recipes/kinetics400/i3d_r50_333_32f.toml [i3d311]=recipes/kinetics400/i3d_r50_311_32f.toml)
for m in tsm tsn i3d333 i3d311; do
  step 60 "train-$m" "$vexp" bench train "${recipe[$m]}" --synthetic --device cuda --precision bf16 --channels-last \
    --steps 20 --warmup 5 --set dist.batch_per_gpu=8 --set data.params.input_size=224 --json >"$out/train_$m.json" \
    && real && "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); ph=r["phases"]; print("   vexp %-7s %2d frames  %7.2f clips/s  step %7.1f ms (fwd %.1f, bwd %.1f, opt %.1f, data %.1f)" % (sys.argv[2], r["clip"][0], r["clips_per_s"], ph["step"]["median_ms"], ph["forward"]["median_ms"], ph["backward"]["median_ms"], ph["optimizer"]["median_ms"], ph["data"]["median_ms"]))' "$out/train_$m.json" $m 2>/dev/null
done

echo "== 5. PyTorch reference on the same GPU (bf16 autocast, channels-last, 8 clips x 8 x 224^2)"
for m in tsm tsn; do
  step 90 "torch-$m" "$py" tools/bench/cpu_vs_pytorch.py --torch-worker $m --device cuda --amp bf16 --threads "$jobs" \
    --clips 8 --frames 8 --size 224 --steps 20 --warmup 5 >"$out/torch_$m.json" && real && \
    "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("   pytorch %-4s %7.2f clips/s  step %7.1f ms  peak GPU memory %.0f MB" % (sys.argv[2], r["clips_per_s"], r["step"], r.get("peak_gpu_mb", 0)))' "$out/torch_$m.json" $m 2>/dev/null
done

echo "== 6. NCCL allreduce, $gpus GPU(s), 256 MiB float"
rdv="$out/nccl_id"
rm -f "$rdv"
pids=()
for ((r = 0; r < gpus; r++)); do
  if [ "$dry" = 1 ]; then
    echo "[dry] RANK=$r WORLD_SIZE=$gpus LOCAL_RANK=$r $vexp bench allreduce --backend nccl --device cuda --mb 256 --reps 20 --param rendezvous=$rdv --param timeout_s=60 --json"
    continue
  fi
  RANK=$r WORLD_SIZE=$gpus LOCAL_RANK=$r timeout 90 "$vexp" bench allreduce --backend nccl --device cuda --mb 256 --reps 20 \
    --param rendezvous="$rdv" --param timeout_s=60 --json >"$out/allreduce_$r.json" 2>"$out/allreduce_$r.log" &
  pids+=($!)
done
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
if real; then
  if [ $ok = 1 ]; then
    "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("   %d rank(s): %.3f ms, algbw %.1f GB/s, busbw %.1f GB/s" % (r["ranks"], r["median_ms"], r["algbw_gb_per_s"], r["busbw_gb_per_s"]))' "$out/allreduce_0.json"
  else
    echo "   allreduce FAILED:"; tail -3 "$out"/allreduce_*.log
  fi
fi

echo "== 7. summary"
if real; then
  "$py" - "$out" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(d, name)))
    except Exception:
        return None
v = {m: load("train_%s.json" % m) for m in ("tsm", "tsn", "i3d333", "i3d311")}
t = {m: load("torch_%s.json" % m) for m in ("tsm", "tsn")}
op = load("op_float.json")
def ratio(label, a, b, goal=""):
    if a and b:
        print("   %-44s %6.3f  %s" % (label, a / b, goal))
    else:
        print("   %-44s   n/a (a step above failed)" % label)
cps = lambda r: r and r["clips_per_s"]
ratio("vexp TSM clips/s / PyTorch TSM clips/s", cps(v["tsm"]), cps(t["tsm"]), "goal >= 1.1")
ratio("vexp TSN clips/s / PyTorch TSN clips/s", cps(v["tsn"]), cps(t["tsn"]))
ratio("vexp TSM clips/s / vexp TSN clips/s", cps(v["tsm"]), cps(v["tsn"]))
ratio("vexp TSM 8f / I3D-3x3x3 32f clips/s", cps(v["tsm"]), cps(v["i3d333"]), "paper: 1.8")
ratio("vexp TSM 8f / I3D-3x1x1 32f clips/s", cps(v["tsm"]), cps(v["i3d311"]))
ratio("shift forward / device copy bandwidth (fp32)", op and op["forward_vs_copy"], op and 1.0, "goal >= 0.8")
PY
fi
echo "== total: $((SECONDS - t0)) s"
