#!/usr/bin/env bash
# Builds the binaries tests/gpu/run.sh needs (release) and copies them into .gpu_bin/, a folder
# that is not tracked (add `/.gpu_bin/` to .git/info/exclude) and is carried to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p memlint_verify --example verify_dev
tests=$(cargo test --release -p memlint_verify --test cuda --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "cuda" and m.get("executable"):
        print(m["executable"])')
mkdir -p .gpu_bin
cp target/release/examples/verify_dev .gpu_bin/verify_dev
cp "$tests" .gpu_bin/cuda_tests
ls -la .gpu_bin
