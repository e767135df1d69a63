#!/usr/bin/env bash
# A CI re-run after one file changed: `memlint check` with its cache on a copy of TREE,
# first cold (empty cache), then unchanged (every result reused), then after an edit of
# FILE (a comment appended each round), with the summaries of the project's modules kept
# in the cache and without them (the summaries folder emptied before the run: every
# module around the changed files is parsed again, as before summaries were cached).
# Median of RUNS rounds, each timing both in turn.
#
#   scripts/bench-rerun.sh TREE FILE [RUNS]
#
# FILE is a path inside TREE. MEMLINT=PATH measures that binary instead of building
# target/release/memlint here.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TREE=${1:?usage: bench-rerun.sh TREE FILE [RUNS]}
FILE=${2:?usage: bench-rerun.sh TREE FILE [RUNS]}
RUNS=${3:-3}
[[ -f "$FILE" ]] || { echo "bench-rerun.sh: no file $FILE" >&2; exit 2; }
case "$(cd "$(dirname "$FILE")" && pwd)/" in
    "$(cd "$TREE" && pwd)"/*) ;;
    *) echo "bench-rerun.sh: $FILE is not inside $TREE" >&2; exit 2 ;;
esac
if [[ -z "${MEMLINT:-}" ]]; then
    cargo build --release --quiet -p memlint --manifest-path "$ROOT/Cargo.toml"
    MEMLINT="$ROOT/target/release/memlint"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$TREE" "$WORK/tree"
TREE_ABS=$(cd "$TREE" && pwd)
FILE_ABS="$(cd "$(dirname "$FILE")" && pwd)/$(basename "$FILE")"
COPY="$WORK/tree${FILE_ABS#"$TREE_ABS"}"
CACHE="$WORK/cache"
echo "tree: $TREE ($(find "$WORK/tree" -name '*.py' | wc -l) files), changed file: ${FILE_ABS#"$TREE_ABS"/}, cores: $(nproc)"

seconds() {
    local start end
    start=$(date +%s.%N)
    "$MEMLINT" check --cache-dir "$CACHE" --output-format concise "$WORK/tree" > /dev/null 2>&1 || true
    end=$(date +%s.%N)
    awk "BEGIN {print $end - $start}"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

COLD=$(seconds)
WARM=$(seconds)
: > "$WORK/with"
: > "$WORK/without"
for i in $(seq "$RUNS"); do
    printf '\n# memlint bench-rerun edit %s a\n' "$i" >> "$COPY"
    find "$CACHE" -type d -name summaries -prune -exec rm -rf {} +
    seconds >> "$WORK/without"
    printf '\n# memlint bench-rerun edit %s b\n' "$i" >> "$COPY"
    seconds >> "$WORK/with"
done
WITH=$(median < "$WORK/with")
WITHOUT=$(median < "$WORK/without")
printf '%-46s %8.2f s\n' "cold, empty cache" "$COLD"
printf '%-46s %8.2f s\n' "unchanged (every result reused)" "$WARM"
printf '%-46s %8.2f s\n' "one file changed, summaries not kept" "$WITHOUT"
printf '%-46s %8.2f s\n' "one file changed, summaries kept" "$WITH"
awk "BEGIN {printf \"%-46s %8.2f\n\", \"kept / not kept\", $WITH / $WITHOUT}"
