#!/usr/bin/env bash
# Editor latency of `memlint server`, driven as a subprocess over stdio by a real LSP client
# (crates/memlint_server/examples/stdio_latency.rs): one character typed in the middle of
# the file, time until publishDiagnostics for that version; median and p95 of 30 rounds
# after 3 warm-ups, on generated files (copies of tests/examples/train_classifier.py at 1k,
# 5k and 20k lines, a dense 5k-line file) and on each FILE given. Each file of copies is
# measured twice: in its middle (for 1k and 20k lines a module docstring, where an edit is
# cheap), and on the first indented line after it ("in a def": in the body of a
# definition, where every copy defines the same names again).
#
#   scripts/bench-server.sh [MEMLINT] [FILE...]
#
# MEMLINT: the memlint binary to measure (default: built here, target/release/memlint).
# A first argument that is not an executable file is taken as a FILE.
# Options of the client go through STDIO_LATENCY_ARGS, e.g. STDIO_LATENCY_ARGS="--rounds 60".
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MEMLINT=
if [[ $# -gt 0 && -x "$1" && ! -d "$1" ]]; then
    MEMLINT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    shift
fi
if [[ -z "$MEMLINT" ]]; then
    cargo build --release --quiet -p memlint --manifest-path "$ROOT/Cargo.toml"
    MEMLINT="$ROOT/target/release/memlint"
fi
cargo build --release --quiet -p memlint_server --example stdio_latency --manifest-path "$ROOT/Cargo.toml"
# shellcheck disable=SC2086 # STDIO_LATENCY_ARGS is a list of options
exec "$ROOT/target/release/examples/stdio_latency" --memlint "$MEMLINT" ${STDIO_LATENCY_ARGS:-} "$@"
