#!/usr/bin/env bash
# Issue 29's acceptance run for MEM007 (DataParallel against DDP), on a machine with 2 or more GPUs,
# from the repository root, with the binaries tests/gpu/build.sh made:
#   tests/gpu/run_mem007.sh [BIN_DIR] [DEVICE_COUNTS]     # defaults: .gpu_bin, "2 4" (counts above
#                                                          # the machine's GPUs are skipped)
# It runs the CUDA backend's MEM007 tests (NCCL and peer copies, DataParallel and DDP training as
# one device does, the GPU's figures against the simulator's), then `memlint verify --rule MEM007
# --compare-torch` on the three workloads of issue 29 for each device count, the acceptance check
# over them (acceptance_parallel.py), and MEM007 with too few GPUs visible (exit 2).
# Reports go to $OUT (or $TMPDIR). Exit status: non-zero if any step failed.
set -u -o pipefail
BIN=${1:-.gpu_bin}
COUNTS=${2:-"2 4"}
REPORT_DIR=${OUT:-${TMPDIR:-/tmp}}
HERE=$(dirname "$0")
status=0
# NVLink multicast stays off on shared machines (NCCL, PyTorch, NVSHMEM).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

for lib in libcublas.so libnvrtc.so; do
  if ! ldconfig -p | grep -q "$lib"; then
    dir=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
            $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
            -name "$lib*" 2>/dev/null | head -1 | xargs -r dirname)
    [ -n "$dir" ] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && echo "($lib from $dir)"
  fi
done

gpus=$(nvidia-smi -L | wc -l)
echo "== device: $gpus GPU(s)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader || status=1
nvidia-smi topo -m 2>/dev/null | head -8
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' || true
# memlint finds libnccl.so.2 itself (python3's nvidia-nccl wheel); say where.
python3 -c 'import nvidia.nccl, os; print("nvidia.nccl at", list(nvidia.nccl.__path__)[0])' || true

echo
echo "== GPU tests of MEM007: $BIN/cuda_tests mem007 (GPUs 0,1)"
CUDA_VISIBLE_DEVICES=0,1 "$BIN/cuda_tests" mem007 --test-threads=1 --nocapture || status=1

for n in $COUNTS; do
  if [ "$n" -gt "$gpus" ]; then
    echo "== $n devices: skipped, $gpus GPU(s) here"
    continue
  fi
  devs=$(seq -s, 0 $((n - 1)))
  reports=()
  for w in "8 4096 512" "4 2048 256" "4 8192 4096"; do
    set -- $w
    echo
    echo "== CUDA_VISIBLE_DEVICES=$devs memlint verify --rule MEM007 --devices $n --compare-torch --layers $1 --hidden $2 --batch $3"
    out="$REPORT_DIR/mem007_${n}gpu_$1x$2.json"
    start=$(date +%s%N)
    CUDA_VISIBLE_DEVICES=$devs "$BIN/memlint" verify --rule MEM007 --devices "$n" --compare-torch --layers "$1" --hidden "$2" --batch "$3" -o "$out"
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "memlint verify wall time (process start to exit): $((ms / 1000)).$(printf %03d $((ms % 1000))) s, exit $rc"
    [ $rc -eq 0 ] || status=1
    reports+=("$out")
  done
  echo
  echo "== acceptance on $n devices (tests/gpu/acceptance_parallel.py)"
  python3 "$HERE/acceptance_parallel.py" "${reports[@]}" || status=1
done

echo
echo "== MEM007 with one GPU visible (expected: exit 2 and a message)"
CUDA_VISIBLE_DEVICES=0 "$BIN/memlint" verify --rule MEM007 --devices 2
rc=$?
[ $rc -eq 2 ] || { echo "expected exit 2, got $rc"; status=1; }

echo
echo "== run_mem007.sh exit status: $status"
exit $status
