#!/usr/bin/env bash
# How long `memlint check` takes to print many findings, per output format: the dense file
# of training and evaluation functions (the same generator as bench-server.sh's dense
# file; about 10,400 findings at 50,000 lines), median of RUNS runs of each format, and
# the ratio of `text` (the default: a code frame for each finding) to `concise`.
#
#   ./scripts/bench-output.sh [LINES] [RUNS]        (defaults 50000 and 3)
#   MEMLINT=path/to/memlint STDIO_CLIENT=path/to/stdio_latency ./scripts/bench-output.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${1:-50000}
RUNS=${2:-3}
MEMLINT=${MEMLINT:-target/release/memlint}
if [[ -z "${MEMLINT_SKIP_BUILD:-}" && "$MEMLINT" == target/release/memlint ]]; then
    cargo build --release --quiet -p memlint
fi
CLIENT=${STDIO_CLIENT:-target/release/examples/stdio_latency}
if [[ -z "${STDIO_CLIENT:-}" ]]; then
    cargo build --release --quiet -p memlint_server --example stdio_latency
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$CLIENT" --write-dense "$LINES" "$TMP/dense.py"
python3 - "$MEMLINT" "$TMP/dense.py" "$RUNS" <<'PY'
import json, statistics, subprocess, sys, time
memlint, path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = sum(1 for _ in open(path))
findings = len(json.loads(subprocess.run([memlint, "check", "--no-cache", "--output-format", "json", path],
                                         capture_output=True, text=True).stdout))
print(f"dense file: {lines} lines, {findings} findings; median of {runs} runs, formats in turn")
times = {f: [] for f in ("concise", "text", "json")}
for _ in range(runs):
    for fmt in times:
        start = time.perf_counter()
        done = subprocess.run([memlint, "check", "--no-cache", "--output-format", fmt, path], stdout=subprocess.DEVNULL)
        times[fmt].append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            sys.exit(f"memlint check --output-format {fmt} exited {done.returncode}")
for fmt, t in times.items():
    print(f"{fmt:<8} {statistics.median(t):7.2f} s")
print(f"text / concise: {statistics.median(times['text']) / statistics.median(times['concise']):.2f}")
PY
