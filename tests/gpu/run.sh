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
# `memlint verify` (the binary users lint with) on the default workload (timed), then with
# --compare-torch on the three workloads of issue 15 and the acceptance check over them
# (acceptance.py), then `memlint verify FILES` on the bundled examples (lint, then measure per
# finding), then `memlint verify --from-snapshot` on the recorded CNN and transformer runs with
# PyTorch measuring the MLP it chose (from_snapshot/verify.sh), then without a GPU visible (exit 2
# and a message).
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

# Issue 15's acceptance: the three workloads, each with PyTorch running the same documented loops
# (--compare-torch); acceptance.py checks every saving within 10%, MEM004's step-time cost within
# 5 points, MEM003's zero fractions within 0.05.
for w in "8 4096 512" "4 2048 256" "12 1024 1024"; do
  set -- $w
  echo
  echo "== memlint verify --compare-torch --layers $1 --hidden $2 --batch $3 --iters 20"
  "$BIN/memlint" verify --compare-torch --layers "$1" --hidden "$2" --batch "$3" --iters 20 -o "$REPORT_DIR/compare_$1x$2.json" || status=1
done
echo
echo "== acceptance (tests/gpu/acceptance.py)"
python3 "$(dirname "$0")/acceptance.py" "$REPORT_DIR/compare_8x4096.json" "$REPORT_DIR/compare_4x2048.json" "$REPORT_DIR/compare_12x1024.json" || status=1

echo
echo "== memlint verify tests/examples/*.py (lint first, then the savings per finding)"
"$BIN/memlint" verify tests/examples/*.py
rc=$?
[ $rc -eq 0 ] || { echo "expected exit 0, got $rc"; status=1; }

echo
echo "== memlint verify --from-snapshot on the recorded CNN and transformer runs (tests/gpu/from_snapshot)"
"$(dirname "$0")/from_snapshot/verify.sh" "$BIN" "$(dirname "$0")/../snapshot/data" "$REPORT_DIR" || status=1

echo
echo "== memlint verify with no GPU visible"
CUDA_VISIBLE_DEVICES= "$BIN/memlint" verify --rule MEM001
rc=$?
[ $rc -eq 2 ] || { echo "expected exit 2, got $rc"; status=1; }

echo
echo "== run.sh exit status: $status"
exit $status
