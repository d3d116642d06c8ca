#!/usr/bin/env bash
# Everything vexp can settle on a GPU machine, in one call of at most 8 minutes
# (docs/gpu.md, "One call on a GPU machine"). The machine needs an NVIDIA GPU, nvcc,
# cmake, a CUDA PyTorch (its LibTorch is what vexp builds against) and the
# nvidia-nccl wheel; vexp's other dependencies come from the GPU bundle
# (tools/gpu/bundle.sh, carried as gpu-bundle/), unpacked into a private prefix.
# From the repository root:
#
#   tools/bench/gpu.sh [BUILD_DIR]       (default build-cuda)
#   DRY_RUN=1 tools/bench/gpu.sh         (no GPU needed: the whole plan, each step's time limit, the total)
#
# Results: JSON and logs in $OUT when set (the device tool brings it back), else
# BUILD_DIR/gpu-bench; summary.json there has every step's status and the goal ratios.
# Steps (each with a time limit, never past the budget; a failing step is reported and
# the script goes on where it can):
#   0. OS and tool versions; the machine's glibc against the bundle's;
#   1. unpack the bundle, configure with -DVEXP_CUDA=ON against torch.utils.cmake_prefix_path
#      and the bundle, NCCL from the wheel; build vexp (every plugin, comm/nccl included),
#      the kernel test and check_comm_nccl on every core;
#   2. the CUDA shift kernel's test; a tiny `vexp run` on the GPU in bf16 and in fp16,
#      stopped after its first epoch and resumed (checked: it resumed, not restarted);
#   3. `vexp bench op temporal_shift --device cuda`, fp32/bf16, NCHW/channels-last, against a device copy;
#   4. `vexp bench train --device cuda --precision bf16 --channels-last`, 8 clips per step:
#      TSM-R50 and TSN-R50 8x224^2, I3D-R50 3x3x3 and 3x1x1 32x224^2;
#   5. the PyTorch reference on the same GPU (tools/bench/cpu_vs_pytorch.py's worker):
#      TSM eager and torch.compile, TSN eager;
#   6. `vexp bench data` at 16 threads on synthetic RGB 256^2 frame folders (and videos
#      when the build has FFmpeg, which the bundle's has not), beside the training clips/s;
#   7. comm/nccl on the GPU(s): check_comm_nccl (allreduce / broadcast correctness) and
#      `vexp bench allreduce --backend nccl`;
#   8. the summary: the issue's goal ratios and which bottleneck binds.
set -uo pipefail
build=${1:-build-cuda}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
dry=${DRY_RUN:-0}
budget=${BUDGET_S:-480}   # seconds for the whole script
jobs=$(nproc)
t0=$SECONDS
out=${OUT:-$build/gpu-bench}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ "$dry" != 1 ]; then exec > >(tee -a "$out/gpu.log") 2>&1; fi
exec 3>&1   # status lines; a step's stdout may be a result file
vexp="$build/bin/vexp"
steps_json="$out/steps.jsonl"
: >"$steps_json"
planned=0 nsteps=0

left() { echo $((budget - (SECONDS - t0))); }
real() { [ "$dry" != 1 ]; }  # false in a dry run: the results to print do not exist
# step LIMIT_S NAME cmd...: runs cmd with a time limit (never past the budget), records
# its status in steps.jsonl; in a dry run prints it instead.
step() {
  local limit=$1 name=$2; shift 2
  planned=$((planned + limit)); nsteps=$((nsteps + 1))
  if [ "$dry" = 1 ]; then { printf '[dry] %-20s (limit %3ss):' "$name" "$limit"; printf ' %q' "$@"; echo; } >&3; return 0; fi
  local l; l=$(left)
  [ "$limit" -gt "$l" ] && limit=$l
  if [ "$limit" -le 3 ]; then
    echo "== $name: skipped, the time budget is spent" >&3
    echo "{\"step\": \"$name\", \"status\": \"skipped\", \"seconds\": 0}" >>"$steps_json"; return 1
  fi
  local s0=$SECONDS rc
  timeout --signal=TERM --kill-after=5 "$limit" "$@"
  rc=$?
  local st=ok
  [ $rc -ne 0 ] && st=failed
  [ $rc -eq 124 ] && { st=timeout; echo "== $name: stopped after its ${limit} s limit" >&3; }
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "== $name: failed ($rc)" >&3
  echo "{\"step\": \"$name\", \"status\": \"$st\", \"rc\": $rc, \"seconds\": $((SECONDS - s0)), \"limit\": $limit}" >>"$steps_json"
  return $rc
}
# skip NAME WHY: a step left out on purpose (dry run too).
skip() {
  echo "== $1: skipped: $2" >&3
  [ "$dry" = 1 ] || echo "{\"step\": \"$1\", \"status\": \"skipped\", \"why\": \"$2\"}" >>"$steps_json"
}
# show FILE PYTHON-EXPR-PRINTING-A-LINE: a result line from a JSON file (r), after a step.
show() { real && "$py" -c "import json,sys; r=json.load(open(sys.argv[1])); print('   ' + ($2))" "$1" "${@:3}" 2>/dev/null; }

echo "== 0. the machine"
[ "$dry" = 1 ] && echo "[dry] print /etc/os-release, uname, glibc, nvcc/cmake/ninja/g++/python/torch versions, nvidia-smi (into machine.txt)"
if real; then
  { grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null; uname -srm; echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null)"
    for t in nvcc cmake ninja g++; do printf '%s: ' $t; ($t --version 2>/dev/null || echo missing) | grep -m1 -E '[0-9]+\.[0-9]+'; done
    "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "CUDA", torch.version.cuda, "| GPUs:", torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none visible")' 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1; } | tee "$out/machine.txt" | sed 's/^/   /'
fi
step 10 bundle-check tools/gpu/build-with-bundle.sh check || { real && echo "   the bundle's libraries need a newer glibc: stopping"; real && exit 1; }

if [ "$dry" = 1 ]; then
  tprefix=/path/from/torch.utils.cmake_prefix_path
  gpus=${DRY_GPUS:-1}
else
  "$py" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device visible to PyTorch"' || exit 1
  tprefix=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())')
  # comm/nccl needs nccl.h and libnccl: a pip-installed PyTorch has them in nvidia-nccl.
  if [ -z "${NCCL_HOME:-}" ] && [ ! -e /usr/include/nccl.h ]; then
    NCCL_HOME=$("$py" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) && export NCCL_HOME \
      && echo "   NCCL_HOME=$NCCL_HOME (from the nvidia-nccl wheel)"
  fi
fi
export BUILD_DIR="$build" TORCH_PREFIX="$tprefix" JOBS="$jobs"
export CMAKE_ARGS="-DVEXP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90}"
export TARGETS="vexp test_temporal_shift_cuda check_comm_nccl"

echo "== 1. build ($build, $jobs jobs)"
step 7 bundle-unpack tools/gpu/build-with-bundle.sh unpack >"$out/unpack.log" 2>&1
step 25 configure tools/gpu/build-with-bundle.sh configure >"$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log"; exit 1; }
step 140 build tools/gpu/build-with-bundle.sh build >"$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
real && echo "   built in $((SECONDS - t0)) s"
# The bundle's libraries (libavutil's dependencies) for vexp's processes only.
if real; then eval "$(tools/gpu/build-with-bundle.sh env)"; fi

echo "== 2. correctness on the GPU"
step 8 kernel-test ctest --test-dir "$build" -L cuda -R temporal_shift --output-on-failure
for prec in bf16 fp16; do
  d="$out/run_$prec"
  rm -rf "$d"
  args=(--out "$d" --set run.device=cuda --set run.precision=$prec --set run.progress=none)
  step 10 "run-$prec" "$vexp" run tests/cli/data/tiny.toml "${args[@]}" --stop-after 1 >"$out/run_$prec.log" 2>&1 \
    || { real && tail -5 "$out/run_$prec.log"; }
  ck1=$(sha256sum "$d/checkpoints/epoch_0001.pt" 2>/dev/null | cut -d' ' -f1)
  step 10 "resume-$prec" "$vexp" run tests/cli/data/tiny.toml "${args[@]}" --resume >"$out/resume_$prec.log" 2>&1 \
    || { real && tail -5 "$out/resume_$prec.log"; }
  real && "$py" - "$d" $prec "$ck1" "$out/resume_$prec.log" <<'PY'
import hashlib, json, os, sys, torch
d, prec, ck1, log = sys.argv[1:5]
try:
    s = json.load(open(d + "/summary.json"))
    assert s["device"].startswith("cuda") and s["precision"] == prec, s
    assert "resuming" in open(log).read(), "the second run did not say it resumed"
    # Resumed, not restarted: epoch 1's checkpoint is the first run's, byte for byte.
    assert hashlib.sha256(open(d + "/checkpoints/epoch_0001.pt", "rb").read()).hexdigest() == ck1, "epoch 1 was trained again"
    ck = torch.load(d + "/checkpoints/epoch_0002.pt", map_location=None, weights_only=False)  # must hold CPU tensors
    assert all(t.device.type == "cpu" for t in ck["model"].values()), "checkpoint holds GPU tensors"
    print("   vexp run tiny.toml on %s, %s: stopped after epoch 1, resumed to epoch 2: top-1 %.3f, %d step(s) skipped, checkpoints on the CPU"
          % (s["device"], prec, s["top1"], s["skipped_steps"]))
    json.dump({"precision": prec, "ok": True, "top1": s["top1"]}, open(d + ".check.json", "w"))
except Exception as e:
    print("   run/resume %s FAILED: %s" % (prec, e))
    json.dump({"precision": prec, "ok": False, "error": str(e)}, open(d + ".check.json", "w"))
PY
done

echo "== 3. temporal shift kernel vs device copy, [64,256,56,56] (8 clips x 8 frames)"
for dt in float bfloat16; do
  for cl in "" --channels-last; do
    f="$out/op_${dt}${cl}.json"
    step 7 "op-$dt${cl:+-cl}" "$vexp" bench op temporal_shift --device cuda --shape 64x256x56x56 --frames 8 --dtype $dt $cl \
      --reps 50 --json >"$f" && show "$f" '"%-9s %-14s copy %7.1f GB/s  shift fwd %7.1f GB/s (%.2f of copy)  fwd+bwd %.2f of copy" % (r["dtype"], "channels-last" if r["channels_last"] else "NCHW", r["copy"]["gb_per_s"], r["forward"]["gb_per_s"], r["forward_vs_copy"], r["forward_backward_vs_copy"])'
  done
done

echo "== 4. vexp training step on the GPU (synthetic clips, bf16 autocast, channels-last, 8 clips per step)"
declare -A recipe=([tsm]=recipes/kinetics400/tsm_r50_8f.toml [tsn]=recipes/kinetics400/tsn_r50_8f.toml
                   [i3d333]=recipes/kinetics400/i3d_r50_333_32f.toml [i3d311]=recipes/kinetics400/i3d_r50_311_32f.toml)
declare -A tlimit=([tsm]=16 [tsn]=16 [i3d333]=20 [i3d311]=20)
for m in tsm tsn i3d333 i3d311; do
  f="$out/train_$m.json"
  step "${tlimit[$m]}" "train-$m" "$vexp" bench train "${recipe[$m]}" --synthetic --device cuda --precision bf16 --channels-last \
    --steps 15 --warmup 3 --set dist.batch_per_gpu=8 --set data.params.input_size=224 --json >"$f" \
    && show "$f" '"vexp %-7s %2d frames  %7.2f clips/s  step %7.1f ms (fwd %.1f, bwd %.1f, opt %.1f, data %.1f)" % (sys.argv[2], r["clip"][0], r["clips_per_s"], r["phases"]["step"]["median_ms"], r["phases"]["forward"]["median_ms"], r["phases"]["backward"]["median_ms"], r["phases"]["optimizer"]["median_ms"], r["phases"]["data"]["median_ms"])' $m
done

echo "== 5. PyTorch reference on the same GPU (bf16 autocast, channels-last, 8 clips x 8 x 224^2)"
for v in tsm tsn tsm-compile; do
  m=${v%-compile}; extra=(); lim=20
  [ "$v" = tsn ] && lim=17
  [ "$v" = tsm-compile ] && { extra=(--compile); lim=50; }
  f="$out/torch_$v.json"
  step $lim "torch-$v" "$py" tools/bench/cpu_vs_pytorch.py --torch-worker $m --device cuda --amp bf16 --channels-last \
    --threads "$jobs" --clips 8 --frames 8 --size 224 --steps 15 --warmup 3 "${extra[@]}" >"$f" \
    && show "$f" '"pytorch %-12s %7.2f clips/s  step %7.1f ms  peak GPU memory %.0f MB (torch %s)" % (sys.argv[1].split("torch_")[1][:-5], r["clips_per_s"], r["step"], r.get("peak_gpu_mb", 0), r.get("torch"))'
done

echo "== 6. the loader at 16 threads (RGB 256x256 clips, 8 frames of 16 -> 224^2, the training input)"
data="$out/data"
rm -rf "$data"
mk=(--channels 3 --size 256 --frames 16 --classes 4 --train-clips 256 --val-clips 8)
dset=(--set data.params.channels=3 --set 'data.params.mean=[0.485,0.456,0.406]' --set 'data.params.std=[0.229,0.224,0.225]'
      --set data.params.classes=4 --set data.params.input_size=224 --set data.params.scale_size=256 --set data.params.frames=8
      --set model.node.features.in_channels=3)
step 10 data-make-frames "$vexp" data make-synthetic --as frames --out "$data/frames" "${mk[@]}" >"$out/data_make.log" 2>&1
step 15 data-frames env VEXP_MOTION_DATA="$data/frames" "$vexp" bench data recipes/quickstart/tsm_motion_video.toml \
  "${dset[@]}" --split train --threads 16 --json >"$out/data_frames.json" \
  && show "$out/data_frames.json" '"frame folders: %s" % json.dumps(r)[:200]'
if real && ! grep -q '^VEXP_VIDEO:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  skip data-videos "this build has no video decoding (-DVEXP_VIDEO=OFF: FFmpeg is not in the GPU bundle)"
else
  step 15 data-videos bash -c "\"\$0\" data make-synthetic --out \"\$1\" ${mk[*]} >/dev/null && VEXP_MOTION_DATA=\"\$1\" \"\$0\" bench data recipes/quickstart/tsm_motion_video.toml ${dset[*]} --split train --threads 16 --json" \
    "$vexp" "$data/videos" >"$out/data_videos.json"
fi

echo "== 7. comm/nccl, $gpus GPU(s)"
step 10 nccl-check ctest --test-dir "$build" -R comm_nccl --output-on-failure >"$out/nccl_check.log" 2>&1 \
  && real && grep -E "tests passed|Passed" "$out/nccl_check.log" | tail -1 | sed 's/^/   /'
rdv="$out/nccl_id"
rm -f "$rdv"
if [ "$dry" = 1 ]; then
  step 10 nccl-allreduce env RANK=0 WORLD_SIZE="$gpus" LOCAL_RANK=0 "$vexp" bench allreduce --backend nccl --device cuda --mb 256 --reps 20 \
    --param rendezvous="$rdv" --param timeout_s=30 --json
else
  # One process per GPU: ranks 1.. in the background, rank 0 as the timed step.
  pids=()
  for ((r = 1; r < gpus; r++)); do
    RANK=$r WORLD_SIZE=$gpus LOCAL_RANK=$r timeout 15 "$vexp" bench allreduce --backend nccl --device cuda --mb 256 --reps 20 \
      --param rendezvous="$rdv" --param timeout_s=30 --json >"$out/allreduce_$r.json" 2>"$out/allreduce_$r.log" &
    pids+=($!)
  done
  step 10 nccl-allreduce env RANK=0 WORLD_SIZE="$gpus" LOCAL_RANK=0 "$vexp" bench allreduce --backend nccl --device cuda --mb 256 --reps 20 \
    --param rendezvous="$rdv" --param timeout_s=30 --json >"$out/allreduce_0.json" 2>"$out/allreduce_0.log" \
    && show "$out/allreduce_0.json" '"%d rank(s): %.3f ms, algbw %.1f GB/s, busbw %.1f GB/s" % (r["ranks"], r["median_ms"], r["algbw_gb_per_s"], r["busbw_gb_per_s"])' \
    || tail -3 "$out"/allreduce_0.log
  for p in "${pids[@]}"; do wait "$p"; done
fi

echo "== 8. summary ($out/summary.json)"
step 3 summary "$py" - "$out" "$((SECONDS - t0))" <<'PY'
import json, os, sys
d, elapsed = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        return json.load(open(os.path.join(d, name)))
    except Exception:
        return None
v = {m: load("train_%s.json" % m) for m in ("tsm", "tsn", "i3d333", "i3d311")}
t = {m: load("torch_%s.json" % m) for m in ("tsm", "tsn", "tsm-compile")}
op = load("op_float.json")
cps = lambda r: r and r.get("clips_per_s")
ratios = {}
def ratio(key, label, a, b, goal=None):
    val = a / b if a and b else None
    ratios[key] = {"value": val, "goal": goal}
    print("   %-46s %s  %s" % (label, "%6.3f" % val if val else "   n/a (a step above failed)",
                               ("goal >= %g: %s" % (goal, "met" if val >= goal else "NOT met")) if goal and val else ""))
ratio("tsm_vs_torch_eager", "vexp TSM / PyTorch TSM eager (clips/s)", cps(v["tsm"]), cps(t["tsm"]), 1.1)
ratio("tsm_vs_torch_compile", "vexp TSM / PyTorch TSM torch.compile", cps(v["tsm"]), cps(t["tsm-compile"]), 1.0)
ratio("tsn_vs_torch_eager", "vexp TSN / PyTorch TSN eager", cps(v["tsn"]), cps(t["tsn"]))
ratio("tsm_vs_i3d333", "vexp TSM 8f / I3D-3x3x3 32f (paper: 1.8)", cps(v["tsm"]), cps(v["i3d333"]), 1.6)
ratio("tsm_vs_i3d311", "vexp TSM 8f / I3D-3x1x1 32f", cps(v["tsm"]), cps(v["i3d311"]))
ratio("shift_vs_copy", "shift forward / device copy bandwidth (fp32)", op and op.get("forward_vs_copy"), op and 1.0, 0.8)
# The paper's three bottlenecks: data loading, computation, communication.
df, dv = load("data_frames.json"), load("data_videos.json")
def loader_cps(r):
    if not r:
        return None
    for k in ("clips_per_s", "wall_clips_per_s"):
        if k in r:
            return r[k]
    rows = r.get("results") or r.get("threads")
    if isinstance(rows, list) and rows:
        return rows[-1].get("clips_per_s") or rows[-1].get("wall_clips_per_s")
    return None
train_cps = cps(v["tsm"])
load_cps = loader_cps(df)
ar = load("allreduce_0.json")
binds = None
if train_cps and load_cps:
    binds = "data loading" if load_cps < train_cps else "computation"
    print("   loader (frame folders, 16 threads) %.1f clips/s vs TSM training %.1f clips/s: %s binds on this machine"
          % (load_cps, train_cps, binds))
    if ar:
        print("   (communication: one GPU, %.1f GB/s busbw on 256 MiB; it binds only across GPUs)" % ar.get("busbw_gb_per_s", 0))
steps = [json.loads(l) for l in open(os.path.join(d, "steps.jsonl")) if l.strip()]
checks = {p: load("run_%s.check.json" % p) for p in ("bf16", "fp16")}
summary = {"elapsed_s": elapsed, "steps": steps, "ratios": ratios, "run_resume": checks,
           "loader_clips_per_s": {"frames": load_cps, "videos": loader_cps(dv)}, "train_clips_per_s": {m: cps(r) for m, r in v.items()},
           "torch_clips_per_s": {m: cps(r) for m, r in t.items()}, "bottleneck": binds,
           "failed": [s["step"] for s in steps if s.get("status") not in ("ok", "skipped")]}
try:
    summary["machine"] = open(os.path.join(d, "machine.txt")).read().splitlines()
except OSError:
    pass
json.dump(summary, open(os.path.join(d, "summary.json"), "w"), indent=1)
print("   steps failed: %s" % (", ".join(summary["failed"]) or "none"))
PY
if [ "$dry" = 1 ]; then
  echo "== plan: $nsteps steps, time limits summing to $planned s (budget $budget s)"
fi
echo "== total: $((SECONDS - t0)) s"
