#!/usr/bin/env bash
# On a GPU machine: `memlint verify --from-snapshot` (CUDA backend) on each recording of
# record.sh, then PyTorch's own figures for the MLP it chose (mlp_check.py).
#   tests/gpu/from_snapshot/verify.sh BIN_DIR DATA_DIR OUT_DIR
set -u -o pipefail
BIN=${1:?usage: verify.sh BIN_DIR DATA_DIR OUT_DIR}
DATA=${2:?}
OUT_DIR=${3:?}
HERE=$(dirname "$0")
status=0
for lib in libcublas.so libnvrtc.so; do
  if ! ldconfig -p | grep -q "$lib"; then
    dir=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
            $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
            -name "$lib*" 2>/dev/null | head -1 | xargs -r dirname)
    [ -n "$dir" ] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done
export PYTHONUNBUFFERED=1
for name in cnn_fp32 transformer_fp32 transformer_fp16; do
  echo "== memlint verify --from-snapshot $name.pickle"
  start=$(date +%s%N)
  "$BIN/memlint" verify --from-snapshot "$DATA/$name.pickle" -o "$OUT_DIR/from_$name.json" || status=1
  echo "wall time: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  echo "== PyTorch, the same MLP"
  python3 "$HERE/mlp_check.py" "$OUT_DIR/from_$name.json" || status=1
  echo
done
exit $status
