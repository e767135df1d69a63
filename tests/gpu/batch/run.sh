#!/usr/bin/env bash
# Issue 30 on a GPU machine: records the three models at batch 16 with `memlint record --steps 4`,
# measures PyTorch's figures at batch 8..256 and the largest batch under 4 and 10 GiB
# (measure.py), runs `memlint record` on the bundled example scripts (a normal exit, a program
# that fails, an out-of-memory error under a launcher that caps the process's memory) and on the
# GPT-2 script at batch 1024 (out of memory), then checks the acceptance bars (acceptance.py).
#   tests/gpu/batch/run.sh MEMLINT_BINARY OUTDIR
# Exit status: that of acceptance.py.
set -u -o pipefail
BIN=$(realpath "${1:?usage: run.sh MEMLINT_BINARY OUTDIR}")
DIR=$(mkdir -p "${2:?usage: run.sh MEMLINT_BINARY OUTDIR}" && realpath "$2")
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
export PYTHONUNBUFFERED=1
python3 -c 'import torch, torchvision, transformers, sys; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__, "python", sys.version.split()[0], torch.cuda.get_device_name())'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for m in resnet18 gpt2 mlp; do
  echo "== memlint record --steps 4 -- python3 train.py --model $m --batch 16"
  start=$(date +%s)
  "$BIN" record --steps 4 --no-lint -o "$DIR/${m}_b16.pickle" -- python3 "$here/train.py" --model "$m" --batch 16
  echo "exit status $? ($(( $(date +%s) - start )) s)"
done
for m in resnet18 gpt2 mlp; do
  echo "== measure.py --model $m"
  python3 "$here/measure.py" --model "$m" --out "$DIR/${m}_measured.json" || echo "measure.py $m FAILED"
done
cd "$repo"
echo "== memlint record -- python3 tests/examples/generate_text.py (a normal exit)"
"$BIN" record -o "$DIR/ex_generate_text.pickle" -- python3 tests/examples/generate_text.py > "$DIR/ex_generate_text.stdout"
echo "exit status $?; stdout $(wc -c < "$DIR/ex_generate_text.stdout") bytes"
echo "== memlint record -- python3 tests/examples/train_classifier.py --epochs 1 (the script fails; its folder is linted)"
"$BIN" record -o "$DIR/ex_train_classifier.pickle" -- python3 tests/examples/train_classifier.py --epochs 1
echo "exit status $?"
echo "== memlint record -- python3 -c LAUNCHER tests/examples/generate_text.py (out of memory: the launcher caps the process's memory; the script is not edited)"
"$BIN" record --no-lint -o "$DIR/ex_generate_text_oom.pickle" -- python3 -c 'import runpy, sys, torch; torch.cuda.set_per_process_memory_fraction(0.0005); sys.argv = ["tests/examples/generate_text.py"]; runpy.run_path(sys.argv[0], run_name="__main__")' > "$DIR/ex_generate_text_oom.stdout" 2>&1
echo "exit status $?; $(grep -c 'OutOfMemoryError' "$DIR/ex_generate_text_oom.stdout") OutOfMemoryError lines"
echo "== memlint record -- python3 tests/gpu/batch/train.py --model gpt2 --batch 1024 (out of memory)"
"$BIN" record --no-lint -o "$DIR/oom_gpt2_b1024.pickle" -- python3 "$here/train.py" --model gpt2 --batch 1024 --steps 2
echo "exit status $?"
echo "== acceptance"
python3 "$here/acceptance.py" --bin "$BIN" --dir "$DIR"
