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
#   scripts/bench-instructions.sh MEMLINT_A [MEMLINT_B] TREE
set -euo pipefail
if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: scripts/bench-instructions.sh MEMLINT_A [MEMLINT_B] TREE" >&2
    exit 2
fi
command -v valgrind > /dev/null || { echo "bench-instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
TREE=${!#}
BUILDS=("${@:1:$#-1}")
[[ -e "$TREE" ]] || { echo "bench-instructions: $TREE does not exist" >&2; exit 2; }
for bin in "${BUILDS[@]}"; do
    [[ -x "$bin" ]] || { echo "bench-instructions: $bin is not an executable" >&2; exit 2; }
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# The total of instructions callgrind counted for one command.
instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" "$@" > /dev/null 2> "$OUT/log" || true
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$OUT/log" | tail -n 1
}
echo "tree: $TREE"
declare -A count
for i in "${!BUILDS[@]}"; do
    for mode in project no-project; do
        flags=(--no-cache --output-format concise)
        [[ $mode == no-project ]] && flags+=(--no-project)
        n=$(instructions "${BUILDS[$i]}" check "${flags[@]}" "$TREE")
        [[ -n "$n" ]] || { echo "bench-instructions: valgrind counted nothing for ${BUILDS[$i]}" >&2; cat "$OUT/log" >&2; exit 1; }
        count[$i,$mode]=$n
        printf '%s check%s: %s instructions\n' "${BUILDS[$i]}" "$([[ $mode == no-project ]] && echo ' --no-project')" "$(printf "%'d" "$n")"
    done
    printf '%s: the project pass takes %.1f%% more instructions than --no-project\n' "${BUILDS[$i]}" "$(awk "BEGIN {print (${count[$i,project]} / ${count[$i,no-project]} - 1) * 100}")"
done
if [[ ${#BUILDS[@]} -eq 2 ]]; then
    for mode in project no-project; do
        printf 'B against A, check%s: %+.1f%%\n' "$([[ $mode == no-project ]] && echo ' --no-project')" "$(awk "BEGIN {print (${count[1,$mode]} / ${count[0,$mode]} - 1) * 100}")"
    done
fi
