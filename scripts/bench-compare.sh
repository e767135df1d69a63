#!/usr/bin/env bash
# Two builds of memlint on one tree, in alternating rounds: the medians of wall time and of
# CPU time (user + system, all threads) of `memlint check --no-cache` and of
# `--no-cache --no-project`, and B's change against A. Alternating rounds put both builds
# through the same busy and quiet moments of the machine; CPU time moves less than wall
# time when another process shares the cores. For a change too small to show in the
# whole-run ratios of bench-check.sh (their spread from run to run is about 10%).
#
#   scripts/bench-compare.sh A B TREE [ROUNDS]     (ROUNDS: 5 by default)
set -euo pipefail
if [[ $# -lt 3 ]]; then
    echo "usage: scripts/bench-compare.sh MEMLINT_A MEMLINT_B TREE [ROUNDS]" >&2
    exit 2
fi
A=$1 B=$2 TREE=$3 ROUNDS=${4:-5}
for bin in "$A" "$B"; do
    [[ -x "$bin" ]] || { echo "bench-compare: $bin is not an executable" >&2; exit 2; }
done
[[ -e "$TREE" ]] || { echo "bench-compare: $TREE does not exist" >&2; exit 2; }
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT
echo "A: $A"
echo "B: $B"
echo "tree: $TREE, $ROUNDS alternating rounds, cores: $(nproc)"
for mode in project no-project; do
    flags=(--no-cache --output-format concise)
    [[ $mode == no-project ]] && flags+=(--no-project)
    for _ in $(seq "$ROUNDS"); do
        for which in A B; do
            bin=$A
            [[ $which == B ]] && bin=$B
            # %e wall seconds, %U user, %S system; memlint exits 1 when it finds something.
            /usr/bin/time -f "$mode $which %e %U %S" -a -o "$RAW" "$bin" check "${flags[@]}" "$TREE" > /dev/null 2>&1 || true
        done
    done
done
python3 - "$RAW" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if len(line.split()) == 5]
for mode in ("project", "no-project"):
    figures = {}
    for which in ("A", "B"):
        runs = [r for r in rows if r[0] == mode and r[1] == which]
        wall = statistics.median(float(r[2]) for r in runs)
        cpu = statistics.median(float(r[3]) + float(r[4]) for r in runs)
        figures[which] = (wall, cpu)
    (wa, ca), (wb, cb) = figures["A"], figures["B"]
    name = "memlint check" if mode == "project" else "memlint check --no-project"
    change = lambda a, b: f"{100 * (b / a - 1):+.1f}%" if a > 0 else "n/a"
    print(f"{name}: wall {wa:.2f} -> {wb:.2f} s ({change(wa, wb)}), CPU {ca:.2f} -> {cb:.2f} s ({change(ca, cb)})")
PY
