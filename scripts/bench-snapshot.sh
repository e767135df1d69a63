#!/usr/bin/env bash
# Speed and memory of `memlint snapshot --format json` beside CPython's pickle.load of the
# same file, on large snapshots built by replicating a recorded trace (in /tmp, never
# committed). Prints wall time and peak RSS of each, and their ratios (same run).
#
# usage: scripts/bench-snapshot.sh [SIZE_MB ...]   (default: 1024 4096)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=("${@:-1024 4096}")
[[ $# -eq 0 ]] && SIZES=(1024 4096)
cargo build --release --locked -p memlint >/dev/null
BIN=target/release/memlint
SRC=tests/snapshot/data/retain_graph_bad.pickle
TMP=${TMPDIR:-/tmp}/memlint-bench-snapshot
mkdir -p "$TMP"
measure() { # prints "seconds max_rss_kib"
    /usr/bin/time -f '%e %M' -o "$TMP/time" "$@" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; return 1; }
    cat "$TMP/time"
}
printf '%-10s %-22s %10s %12s\n' size tool seconds peak_rss_MiB
for mb in "${SIZES[@]}"; do
    f="$TMP/snap-$mb.pickle"
    [[ -f $f ]] || python3 scripts/bench-snapshot-make.py "$SRC" "$f" "$mb" >&2
    free_kib=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
    read -r ms mk < <(measure "$BIN" snapshot "$f" --format json)
    printf '%-10s %-22s %10s %12d\n' "${mb}MB" "memlint snapshot" "$ms" $((mk / 1024))
    # CPython needs several times the file in memory: skip it when that would not fit
    if (( mb * 1024 * 6 < free_kib )); then
        read -r ps pk < <(measure python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' "$f")
        printf '%-10s %-22s %10s %12d\n' "${mb}MB" "python3 pickle.load" "$ps" $((pk / 1024))
        python3 -c "import sys; m,p,mk,pk=map(float,sys.argv[1:]); print(f'{sys.argv[0] if 0 else \"\"}ratio: memlint {p/m:.1f}x faster than pickle.load alone, peak RSS {pk/mk:.1f}x lower')" "$ms" "$ps" "$mk" "$pk"
    else
        echo "${mb}MB: pickle.load skipped (needs more than the $((free_kib / 1024)) MiB available)"
    fi
done
