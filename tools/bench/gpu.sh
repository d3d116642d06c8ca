#!/usr/bin/env bash
# GPU build and benchmarks, for a machine with an NVIDIA GPU, nvcc and a CUDA
# PyTorch (its libtorch is what vexp builds against). Usage, from the repository root:
#   tools/bench/gpu.sh [BUILD_DIR]        (default build-cuda; about 5 minutes on 16 cores)
#
# What it does and prints, and what it does NOT (yet) do -- be honest about both:
#   1. configures with -DVEXP_CUDA=ON against `torch.utils.cmake_prefix_path`
#      (comm/nccl and the temporal_shift plugin's CUDA path), builds vexp and the tests;
#   2. runs the CUDA shift kernel's test (every dtype width, NCHW/NHWC, fwd/bwd)
#      against its host reference;
#   3. `vexp bench op temporal_shift --device cuda` in fp32 and bf16, NCHW and
#      channels-last: the kernel's GB/s against a device copy of the same tensor;
#   4. the PyTorch reference (cpu_vs_pytorch.py's worker, --device cuda) on the same GPU: TSM-R50
#      and TSN-R50, 8 x 224^2, bf16 autocast, clips/s.
#   NOT done: vexp's training step on the GPU (ModelGraph, the trainer and
#   `vexp bench train` run on the CPU only; mixed precision, pinned-memory
#   host->device copies and the I3D / TSN GPU throughput of vexp are not
#   implemented), and the NCCL allreduce bandwidth (needs `vexp bench comm` over
#   comm/nccl, not written). The script has not been run: the project's machine
#   has no GPU.
set -euo pipefail
build=${1:-build-cuda}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
prefix=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
"$py" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device visible to PyTorch"; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))'
jobs=$(nproc)
t0=$SECONDS
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DVEXP_CUDA=ON -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >"$build.configure.log" 2>&1 || { tail -30 "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$jobs" >"$build.build.log" 2>&1 || { tail -40 "$build.build.log"; exit 1; }
echo "== build: $((SECONDS - t0)) s"
ctest --test-dir "$build" -L cuda --output-on-failure
vexp="$build/bin/vexp"
echo "== temporal shift kernel vs device copy, [64,256,56,56] (8 clips x 8 frames)"
for dt in float bfloat16; do
  for cl in "" --channels-last; do
    "$vexp" bench op temporal_shift --device cuda --shape 64x256x56x56 --frames 8 --dtype $dt $cl --reps 50
  done
done
echo "== PyTorch reference on the same GPU (bf16 autocast, 8 clips x 8 x 224^2)"
for m in tsm tsn; do
  echo -n "pytorch $m: "
  "$py" tools/bench/cpu_vs_pytorch.py --torch-worker $m --device cuda --amp bf16 --threads "$jobs" \
    --clips 8 --frames 8 --size 224 --steps 20 --warmup 5
done
echo "== vexp training on the GPU: not implemented (see the header of this script)"
echo "== total: $((SECONDS - t0)) s"
