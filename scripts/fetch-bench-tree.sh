#!/usr/bin/env bash
# A large real PyTorch tree for benchmarks: the Python files of seven public PyTorch
# libraries, from their PyPI wheels (pinned, so figures can be compared across runs).
#
#   scripts/fetch-bench-tree.sh DIR          then   scripts/bench-check.sh DIR
#
# Needs python3 with pip and unzip; about 5,000 files and 2.2 million lines.
set -euo pipefail
DIR=${1:?usage: fetch-bench-tree.sh DIR}
WHEELS=$(mktemp -d)
trap 'rm -rf "$WHEELS"' EXIT
python3 -m pip download --quiet --no-deps --dest "$WHEELS" --platform manylinux_2_28_x86_64 --only-binary=:all: \
    transformers==5.23.0 diffusers==0.42.1 timm==1.0.31 torchvision==0.29.2 \
    lightning==2.6.6 accelerate==1.15.0 peft==0.21.2
mkdir -p "$DIR"
for wheel in "$WHEELS"/*.whl; do
    name=$(basename "$wheel" | cut -d- -f1)
    unzip -q -o "$wheel" '*.py' -d "$DIR/$name"
done
echo "$DIR: $(find "$DIR" -name '*.py' | wc -l) files, $(find "$DIR" -name '*.py' -print0 | xargs -0 cat | wc -l) lines"
