#!/usr/bin/env bash
# Builds the binaries tests/gpu/run.sh needs (release) and copies them into .gpu_bin/, a folder
# that is not tracked (.gitignore) and is carried to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p memlint
tests=$(cargo test --release -p memlint_verify --test cuda --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "cuda" and m.get("executable"):
        print(m["executable"])')
mkdir -p .gpu_bin
cp target/release/memlint .gpu_bin/memlint
cp "$tests" .gpu_bin/cuda_tests
ls -la .gpu_bin
