#!/usr/bin/env bash
# Instructions executed by builds of memlint on one tree, counted by valgrind (callgrind):
# `memlint check --no-cache` and `--no-cache --no-project`, each build's counts and B's
# change against A. Counts do not move with the machine's load, so a change of a few
# percent shows where wall and CPU times on a shared machine vary by ±10% from one hour to
# the next (bench-compare.sh). Valgrind runs a program's threads one at a time and about 50
# times slower: give it a tree of a few hundred files (torchtune of the engine tree: about
# 2 minutes a run), and both builds the same tree. Counts are not time (a cache miss costs
# more than an add); bench-check.sh and bench-compare.sh time the whole tree.
#
# With --cache, callgrind also simulates this machine's first-level data cache and its
# second-level cache as the last level (sizes from `getconf`; the third level of a shared
# machine is shared with other work), and branch prediction, about three times as slowly
# (HobbitLong's CMC, 13 files: 26 s against 9 s): the mispredicted branches, and the data's
# D1 and L2 misses (reads and writes), of each run beside its instructions, for a
# change meant to make the same work cheaper (memory laid out better) rather than less.
# On torchtune (a2a986f) the project pass read +31.4% instructions, +36.6% mispredicted
# branches, +46.0% D1 misses and +134.6% L2 misses against --no-project, and took 1.55
# times its CPU time.
#
#   scripts/bench-instructions.sh [--cache] MEMLINT_A [MEMLINT_B] TREE
set -euo pipefail
CACHE=0
if [[ ${1:-} == --cache ]]; then
    CACHE=1
    shift
fi
if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: scripts/bench-instructions.sh [--cache] MEMLINT_A [MEMLINT_B] TREE" >&2
    exit 2
fi
command -v valgrind > /dev/null || { echo "bench-instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
TREE=${!#}
BUILDS=("${@:1:$#-1}")
[[ -e "$TREE" ]] || { echo "bench-instructions: $TREE does not exist" >&2; exit 2; }
for bin in "${BUILDS[@]}"; do
    [[ -x "$bin" ]] || { echo "bench-instructions: $bin is not an executable" >&2; exit 2; }
done
VALGRIND=(valgrind --tool=callgrind)
if [[ $CACHE -eq 1 ]]; then
    cache() { getconf "LEVEL$1_$2" 2> /dev/null || true; }
    D1="$(cache 1 DCACHE_SIZE),$(cache 1 DCACHE_ASSOC),$(cache 1 DCACHE_LINESIZE)"
    L2="$(cache 2 CACHE_SIZE),$(cache 2 CACHE_ASSOC),$(cache 2 CACHE_LINESIZE)"
    [[ $D1 =~ ^[0-9]+,[0-9]+,[0-9]+$ && $L2 =~ ^[0-9]+,[0-9]+,[0-9]+$ ]] || {
        echo "bench-instructions: getconf does not give this machine's D1 and L2 caches (size, ways, line): D1 $D1, L2 $L2" >&2
        exit 2
    }
    VALGRIND+=(--cache-sim=yes --branch-sim=yes "--D1=$D1" "--LL=$L2")
    echo "simulated: D1 $D1, L2 $L2 (size, ways, line) as the last level, branch prediction"
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# The events callgrind counted for one command, from its "Collected" line: instructions
# alone, or with --cache: instructions, mispredicted branches, D1 misses, L2 misses.
# (The line's events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim.)
counts() {
    "${VALGRIND[@]}" --callgrind-out-file="$OUT/callgrind.out" "$@" > /dev/null 2> "$OUT/log" || true
    sed -n 's/.*Collected : \([0-9 ]*\).*/\1/p' "$OUT/log" | tail -n 1 | awk -v cache="$CACHE" '
        cache == 0 && NF >= 1 { print $1 }
        cache == 1 && NF >= 13 { print $1, $11 + $13, $5 + $6, $8 + $9 }'
}
EVENTS=(instructions)
[[ $CACHE -eq 0 ]] || EVENTS=(instructions "mispredicted branches" "D1 misses" "L2 misses")
echo "tree: $TREE"
declare -A count
for i in "${!BUILDS[@]}"; do
    for mode in project no-project; do
        flags=(--no-cache --output-format concise)
        [[ $mode == no-project ]] && flags+=(--no-project)
        read -r -a found <<< "$(counts "${BUILDS[$i]}" check "${flags[@]}" "$TREE")"
        [[ ${#found[@]} -eq ${#EVENTS[@]} ]] || { echo "bench-instructions: valgrind counted nothing for ${BUILDS[$i]}" >&2; cat "$OUT/log" >&2; exit 1; }
        for e in "${!EVENTS[@]}"; do
            count[$i,$mode,$e]=${found[$e]}
            printf '%s check%s: %s %s\n' "${BUILDS[$i]}" "$([[ $mode == no-project ]] && echo ' --no-project')" "$(printf "%'d" "${found[$e]}")" "${EVENTS[$e]}"
        done
    done
    for e in "${!EVENTS[@]}"; do
        printf '%s: the project pass, %+.1f%% %s against --no-project\n' "${BUILDS[$i]}" "$(awk "BEGIN {print (${count[$i,project,$e]} / ${count[$i,no-project,$e]} - 1) * 100}")" "${EVENTS[$e]}"
    done
done
if [[ ${#BUILDS[@]} -eq 2 ]]; then
    for e in "${!EVENTS[@]}"; do
        for mode in project no-project; do
            printf 'B against A, check%s: %+.1f%% %s\n' "$([[ $mode == no-project ]] && echo ' --no-project')" "$(awk "BEGIN {print (${count[1,$mode,$e]} / ${count[0,$mode,$e]} - 1) * 100}")" "${EVENTS[$e]}"
        done
    done
fi
