#!/usr/bin/env bash
# Records every snapshot of tests/snapshot/data on a GPU machine: runs each script,
# writes its pickle and JSON into DIR (argv[1]) and a log. Used once, through the
# device tool; CI only reads what it wrote.
set -uo pipefail
cd "$(dirname "$0")"
DIR=${1:?usage: run_all.sh OUTDIR}
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1
{
  python3 -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0], torch.cuda.get_device_name())'
  for s in eval_no_grad_bad eval_no_grad_fixed summed_loss_bad summed_loss_fixed collect_outputs_bad \
           collect_outputs_fixed retain_graph_bad retain_graph_fixed clean_loop oom_caught; do
    python3 "$s.py" "$DIR" || echo "FAILED: $s"
  done
  python3 varlen_batches.py "$DIR" || echo "FAILED: varlen_segments"
  python3 varlen_batches.py --expandable "$DIR" || echo "FAILED: varlen_expandable"
  ls -l "$DIR"
} 2>&1 | tee "$DIR/record.log"
