#!/usr/bin/env bash
# GPU test script for memlint verify, run on the GPU machine (it needs no Rust there).
#
# Build here first (CI machine, no CUDA needed):
#   tests/gpu/build.sh            # copies the binaries into .gpu_bin/
# then on the GPU machine, from the repository root:
#   tests/gpu/run.sh [BIN_DIR]    # BIN_DIR defaults to .gpu_bin
#
# It runs the CUDA backend's tests (kernels and GEMMs against a CPU reference, autograd gradients
# against a CPU backward, the tracker against cuMemGetInfo, scenarios against the simulator), then
# `memlint verify` (the binary users lint with) on the default workload (timed), then again with
# --compare-torch, then with --dtype fp16 --compare-torch as a markdown table, then
# `memlint verify FILES` on the bundled examples (lint, then measure per finding), then without
# a GPU visible (exit 2 and a message).
# Exit status: non-zero if any step failed.
set -u -o pipefail
BIN=${1:-.gpu_bin}
REPORT_DIR=${OUT:-${TMPDIR:-/tmp}}
status=0

# cudarc loads libcublas and libnvrtc by their usual names. If the loader does not know them (a
# toolkit outside ld.so.conf, or only PyTorch's wheels), point LD_LIBRARY_PATH at them.
for lib in libcublas.so libnvrtc.so; do
  if ! ldconfig -p | grep -q "$lib"; then
    dir=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
            $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
            -name "$lib*" 2>/dev/null | head -1 | xargs -r dirname)
    [ -n "$dir" ] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && echo "($lib from $dir)"
  fi
done

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader || status=1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' || true

echo
echo "== GPU tests: $BIN/cuda_tests"
"$BIN/cuda_tests" --test-threads=1 --nocapture || status=1

echo
echo "== memlint verify (default workload: MLP 8 x 4096, batch 512, 20 iterations, fp32)"
start=$(date +%s%N)
"$BIN/memlint" verify -o "$REPORT_DIR/verify.json" || status=1
end=$(date +%s%N)
ms=$(( (end - start) / 1000000 ))
echo "memlint verify wall time (process start to exit): $((ms / 1000)).$(printf %03d $((ms % 1000))) s"

echo
echo "== memlint verify --compare-torch"
"$BIN/memlint" verify --compare-torch -o "$REPORT_DIR/verify_torch.json" || status=1

echo
echo "== memlint verify --dtype fp16 --compare-torch --format markdown"
"$BIN/memlint" verify --dtype fp16 --compare-torch --format markdown || status=1

echo
echo "== memlint verify tests/examples/*.py (lint first, then the savings per finding)"
"$BIN/memlint" verify tests/examples/*.py
rc=$?
[ $rc -eq 0 ] || { echo "expected exit 0, got $rc"; status=1; }

echo
echo "== memlint verify with no GPU visible"
CUDA_VISIBLE_DEVICES= "$BIN/memlint" verify --rule MEM001
rc=$?
[ $rc -eq 2 ] || { echo "expected exit 2, got $rc"; status=1; }

echo
echo "== run.sh exit status: $status"
exit $status
