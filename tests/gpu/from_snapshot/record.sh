#!/usr/bin/env bash
# Records the non-MLP snapshots of tests/snapshot/data that `memlint verify --from-snapshot` is
# measured on (a CNN in fp32, a transformer in fp32 and under fp16 autocast), each with PyTorch's
# own parameter and activation bytes in NAME.json. Run on a GPU machine: record.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")"
DIR=${1:?usage: record.sh OUTDIR}
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1
{
  python3 -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0], torch.cuda.get_device_name())'
  python3 cnn_fp32.py "$DIR" || echo "FAILED: cnn_fp32"
  python3 transformer.py "$DIR" || echo "FAILED: transformer_fp32"
  python3 transformer.py --fp16 "$DIR" || echo "FAILED: transformer_fp16"
  ls -l "$DIR"
} 2>&1 | tee "$DIR/from_snapshot_record.log"
