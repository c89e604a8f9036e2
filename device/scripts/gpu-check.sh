#!/usr/bin/env bash
# Builds and runs the NCCL check (device/gpu_check, target hpref_gpu_check) on this machine's GPUs:
# one rank per visible GPU in one process (ncclCommInitAll, a thread per GPU), the
# collective and dispatch scenarios against the oracle, a pass/fail table. Needs only
# CUDA, CMake, a C++20 compiler and NCCL (NCCL_ROOT, or PyTorch's nvidia-nccl package,
# found through python3); no MPI, no Boost.
#   device/scripts/gpu-check.sh [--seeds N] [--devices N] [--timeout-ms T]
# Environment: BUILD_DIR (default build/gpu-check), NCCL_ROOT, CUDACXX/CUDAToolkit_ROOT.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$root/build/gpu-check}
if [ -z "${NCCL_ROOT:-}" ] && command -v python3 > /dev/null; then
  NCCL_ROOT=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2> /dev/null || true)
fi
echo "gpu-check: NCCL_ROOT=${NCCL_ROOT:-<search>}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null || true
# The main tree with only what the check needs: the reference, hpref::nccl, the scenarios.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHPREF_WITH_NCCL=ON -DHPREF_WITH_MPI=OFF \
  -DHPREF_BUILD_SIMULATOR=OFF -DHPREF_BUILD_TOOLS=OFF -DHPREF_BUILD_TESTS=OFF \
  -DHPREF_BUILD_BENCH=OFF -DHPREF_PYTHON=OFF ${NCCL_ROOT:+-DNCCL_ROOT="$NCCL_ROOT"}
cmake --build "$build" -j "$(nproc)" --target hpref_gpu_check
if [ -n "${NCCL_ROOT:-}" ] && [ -d "$NCCL_ROOT/lib" ]; then
  export LD_LIBRARY_PATH="$NCCL_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
exec "$build/device/gpu_check/hpref_gpu_check" "$@"
