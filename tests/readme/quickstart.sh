#!/usr/bin/env bash
# README's quick start, command 1, run exactly as README writes it: the first thing a new
# user types must work on a fresh clone (it once failed: `cargo run` could not pick between
# the workspace's two binaries). It builds memlint in release mode and checks the bundled
# examples: exit status 1 (findings) and ruff's summary line.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmd=$(awk '/^## Quick start on a fresh machine/ { q = 1 } q && /^# 1\./ { getline; print; exit }' README.md)
if [[ -z "$cmd" ]]; then
    echo "FAIL: README's quick start has no command 1" >&2
    exit 1
fi
echo "\$ $cmd"
status=0
out=$(bash -c "$cmd" 2>&1) || status=$?
echo "$out" | tail -n 4
if [[ $status -ne 1 ]]; then
    echo "FAIL: exit status $status; README says the command exits 1 (findings)" >&2
    exit 1
fi
grep -qE "^Found [0-9]+ findings? in [0-9]+ files?\.$" <<< "$out" || { echo "FAIL: no 'Found N findings in M files.' line" >&2; exit 1; }
echo "README quick start: ok"
