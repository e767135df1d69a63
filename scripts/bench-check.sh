#!/usr/bin/env bash
# Throughput of `memlint check` (files/s, lines/s; median of several runs), beside
# `ruff check --isolated` with ruff's default rules when ruff is installed.
#
#   scripts/bench-check.sh [TREE] [RUNS]
#
# Without TREE, a tree of 2,000 files is generated from the bundled examples (with the
# findings spread over the files, and renamed functions so every file differs).
# scripts/fetch-bench-tree.sh DIR fetches a large real PyTorch tree (2.2 million lines);
# scripts/fetch-engine-tree.sh DIR the tree of issue 13 (1.6 million lines), in which the
# single 7k-line file huggingface+peft/tests/test_gpu_examples.py is also timed alone.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TREE=${1:-}
RUNS=${2:-5}
# MEMLINT=PATH measures that binary instead of building target/release/memlint here.
if [[ -z "${MEMLINT:-}" ]]; then
    cargo build --release --quiet -p memlint --manifest-path "$ROOT/Cargo.toml"
    MEMLINT="$ROOT/target/release/memlint"
fi

trap 'rm -f "${FINDING_FILES:-}" "${PASSED_FILES:-}" "${PROJECT_PARSED_FILES:-}" "${PARSE_TIMES_PROJECT:-}" "${PARSE_TIMES_NO_PROJECT:-}"; [[ -z "${GENERATED_TREE:-}" ]] || rm -rf "$GENERATED_TREE"' EXIT
if [[ -z "$TREE" ]]; then
    TREE=$(mktemp -d)
    GENERATED_TREE=$TREE
    python3 - "$ROOT/tests/examples" "$TREE" <<'PY'
import pathlib, sys
examples = [p.read_text() for p in sorted(pathlib.Path(sys.argv[1]).glob("*.py"))]
out = pathlib.Path(sys.argv[2])
for i in range(2000):
    d = out / f"pkg{i // 100}"
    d.mkdir(exist_ok=True)
    text = examples[i % len(examples)].replace("def ", f"def v{i}_")
    (d / f"module_{i}.py").write_text(text * (1 + i % 4))
PY
fi

FILES=$(find "$TREE" -name '*.py' -not -path '*/.*' | wc -l)
LINES=$(find "$TREE" -name '*.py' -not -path '*/.*' -print0 | xargs -0 cat | wc -l)
echo "tree: $TREE"
echo "files: $FILES, lines: $LINES, cores: $(nproc)"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
seconds() {
    local start end
    start=$(date +%s.%N)
    "$@" > /dev/null 2>&1 || true
    end=$(date +%s.%N)
    awk "BEGIN {print $end - $start}"
}
time_runs() {
    for _ in $(seq "$RUNS"); do seconds "$@"; done | median
}

MEMLINT_CHECK=("$MEMLINT" check --no-cache --output-format concise "$TREE")
MEMLINT_NO_PROJECT=("$MEMLINT" check --no-cache --no-project --output-format concise "$TREE")
RUFF_CHECK=(ruff check --isolated --no-cache --output-format concise "$TREE")
# tree-sitter alone parsing every file on every core: what memlint's time would be if
# parsing were all it did and every file went through the pre-filter.
cargo build --release --quiet -p memlint_python --example parse_tree --manifest-path "$ROOT/Cargo.toml"
PARSE_ALONE=("$ROOT/target/release/examples/parse_tree" "$TREE")
# The floor under any sound pre-filter: tree-sitter parsing only the files memlint reports
# findings in (it must parse those to report them). Between it and the parse of every
# file lies what sharper triggers could still save. Python files only: parse_tree reads
# a file as Python, not a notebook's cells.
FINDING_FILES=$(mktemp)
"${MEMLINT_CHECK[@]}" 2>/dev/null | sed -n 's/^\(.*\.py\):[0-9]*:[0-9]*: .*/\1/p' | sort -u > "$FINDING_FILES" || true
PARSE_FLOOR=("$ROOT/target/release/examples/parse_tree" --files-from "$FINDING_FILES")
# The floor under the pre-filter as it is: tree-sitter parsing only the files it lets
# through (every rule, without the project, which lets a few more through). What
# `memlint check --no-project` takes beyond it is analysis (the walk, the model, the
# rules), not parsing.
cargo build --release --quiet -p memlint_linter --example prefilter_stats --manifest-path "$ROOT/Cargo.toml"
PASSED_FILES=$(mktemp)
"$ROOT/target/release/examples/prefilter_stats" "$TREE" list > "$PASSED_FILES"
PASSED=$(wc -l < "$PASSED_FILES")
PASSED_TEXT=$(awk -v all="$(find "$TREE" -name '*.py' -not -path '*/.*' -print0 | xargs -0 cat | wc -c)" -v passed="$(tr '\n' '\0' < "$PASSED_FILES" | xargs -0 cat 2>/dev/null | wc -c)" 'BEGIN {printf "%.1f", all ? 100 * passed / all : 0}')
PARSE_PASSED=("$ROOT/target/release/examples/parse_tree" --files-from "$PASSED_FILES")
# The parse a run with the project cannot avoid: every file it parsed, for a lint or for a
# summary alone (MEMLINT_PARSED_FILES lists them). Beside the parse of the files the
# pre-filter lets through without the project, it shows how much of the project pass is
# parsing more text, and how much is the work on the trees.
PROJECT_PARSED_FILES=$(mktemp)
# The same run's statistics end with how many parses it ran and of how many bytes in all:
# beside the text of the files it parsed, the files it parsed more than once.
PROJECT_STATS=$(MEMLINT_PROJECT_STATS=1 MEMLINT_PARSED_FILES="$PROJECT_PARSED_FILES" "${MEMLINT_CHECK[@]}" 2>&1 > /dev/null | sed -n 's/^project: .*; \([0-9]*\) parses of \([0-9]*\) bytes in all$/\1 \2/p' || true)
PROJECT_PARSED=$(wc -l < "$PROJECT_PARSED_FILES")
PROJECT_PARSED_BYTES=$(tr '\n' '\0' < "$PROJECT_PARSED_FILES" | xargs -0 cat 2>/dev/null | wc -c)
PARSE_PROJECT=("$ROOT/target/release/examples/parse_tree" --files-from "$PROJECT_PARSED_FILES")
# What memlint would cost with a perfect pre-filter: the whole engine (parse, model, rules,
# the project around each file) on only the files with findings, which any sound
# pre-filter must let through. No file-level pre-filter can make memlint faster than this.
mapfile -t FINDING_PATHS < "$FINDING_FILES"
MEMLINT_ORACLE=("$MEMLINT" check --no-cache --output-format concise "${FINDING_PATHS[@]}")
# No finding anywhere: nothing to lint (`memlint check` without a path checks the folder it runs in).
[[ ${#FINDING_PATHS[@]} -gt 0 ]] || MEMLINT_ORACLE=(true)
WITH_FINDINGS=${#FINDING_PATHS[@]}
# Each round times every command in turn, so a busy moment slows them all: the medians of
# the per-round ratios are the figures to compare (issue 31: memlint against its parse
# floor and the project pass against --no-project, in the same run).
HAVE_RUFF=0
command -v ruff > /dev/null && HAVE_RUFF=1
# The two timed runs of memlint also time each parse (MEMLINT_PARSE_TIMES: each text's
# hash, length and nanoseconds): tree-sitter's time on the texts both runs parsed, with the
# project over without, tells whether the project pass slows the parse itself down or only
# adds its own work. 0 when the build does not write them.
PARSE_TIMES_PROJECT=$(mktemp)
PARSE_TIMES_NO_PROJECT=$(mktemp)
same_texts_ratio() {
    awk -F'\t' 'NR == FNR { if (!($1 in timed)) timed[$1] = $3; next }
        ($1 in timed) && !($1 in seen) { seen[$1] = 1; a += timed[$1]; b += $3; n++ }
        END { if (b > 0) printf "%.4f %d\n", a / b, n; else print "0 0" }' "$PARSE_TIMES_PROJECT" "$PARSE_TIMES_NO_PROJECT"
}
rounds=$(for _ in $(seq "$RUNS"); do
    rf=0
    [[ $HAVE_RUFF -eq 0 ]] || rf=$(seconds "${RUFF_CHECK[@]}")
    : > "$PARSE_TIMES_PROJECT"
    : > "$PARSE_TIMES_NO_PROJECT"
    ml=$(seconds env MEMLINT_PARSE_TIMES="$PARSE_TIMES_PROJECT" "${MEMLINT_CHECK[@]}")
    pa=$(seconds "${PARSE_ALONE[@]}")
    np=$(seconds env MEMLINT_PARSE_TIMES="$PARSE_TIMES_NO_PROJECT" "${MEMLINT_NO_PROJECT[@]}")
    echo "$ml $rf $pa $np $(seconds "${PARSE_FLOOR[@]}") $(seconds "${MEMLINT_ORACLE[@]}") $(seconds "${PARSE_PASSED[@]}") $(seconds "${PARSE_PROJECT[@]}") $(same_texts_ratio)"
done)
rm -f "$PARSE_TIMES_PROJECT" "$PARSE_TIMES_NO_PROJECT"
ml=$(echo "$rounds" | awk '{print $1}' | median)
parse=$(echo "$rounds" | awk '{print $3}' | median)
no_project=$(echo "$rounds" | awk '{print $4}' | median)
floor=$(echo "$rounds" | awk '{print $5}' | median)
oracle=$(echo "$rounds" | awk '{print $6}' | median)
parse_passed=$(echo "$rounds" | awk '{print $7}' | median)
to_parse=$(echo "$rounds" | awk '{print $1 / $3}' | median)
no_project_to_parse=$(echo "$rounds" | awk '{print $4 / $3}' | median)
project_pass=$(echo "$rounds" | awk '{print ($1 / $4 - 1) * 100}' | median)
printf 'memlint check: %.3f s  %8.0f files/s  %10.0f lines/s\n' "$ml" "$(awk "BEGIN {print $FILES / $ml}")" "$(awk "BEGIN {print $LINES / $ml}")"
cached=$(time_runs "$MEMLINT" check --output-format concise --cache-dir "$TREE/.memlint_cache" "$TREE")
printf 'memlint check (warm cache): %.3f s  %8.0f files/s\n' "$cached" "$(awk "BEGIN {print $FILES / $cached}")"
# A re-run whose results cannot be reused (new settings) but whose project modules did not
# change: every file is linted again, the summaries of the modules around it are read
# from the cache's summary store instead of parsed (and the results are written again).
# The project pass then costs resolution alone; the figure beside --no-project shows how
# much of the cold project pass is parsing and summarizing other modules.
# Such a re-run writes every result to the cache again, which --no-project --no-cache does
# not: the same re-run of --no-project, writing its results to a fresh cache, is timed in
# the same rounds, and the project pass is also given over that.
NO_PROJECT_CACHE="$TREE/.memlint_cache_no_project"
summary_rounds=$(for _ in $(seq "$RUNS"); do
    find "$TREE/.memlint_cache" -name 'results-*.pack' -delete
    rm -rf "$NO_PROJECT_CACHE"
    echo "$(seconds "$MEMLINT" check --output-format concise --cache-dir "$TREE/.memlint_cache" "$TREE") $(seconds "$MEMLINT" check --no-project --output-format concise --cache-dir "$NO_PROJECT_CACHE" "$TREE")"
done)
rm -rf "$NO_PROJECT_CACHE"
summaries_only=$(echo "$summary_rounds" | awk '{print $1}' | median)
no_project_writing=$(echo "$summary_rounds" | awk '{print $2}' | median)
over_writing=$(echo "$summary_rounds" | awk '{print ($1 / $2 - 1) * 100}' | median)
printf 'memlint check, results not cached, summaries cached: %.3f s (%.0f%% over --no-project)\n' "$summaries_only" "$(awk "BEGIN {print ($summaries_only / $no_project - 1) * 100}")"
printf 'the same over --no-project writing its results too (%.3f s): %.0f%% (median of %s rounds)\n' "$no_project_writing" "$over_writing" "$RUNS"
# With ruff installed, each figure also gets its median per-round ratio to ruff's time.
to_ruff() {
    [[ $HAVE_RUFF -eq 1 ]] || return 0
    printf '; %s: %.2f' "$1" "$(echo "$rounds" | awk "{print \$$2 / \$2}" | median)"
}
if [[ $HAVE_RUFF -eq 1 ]]; then
    rf=$(echo "$rounds" | awk '{print $2}' | median)
    printf 'ruff check --isolated: %.3f s  %8.0f files/s  %10.0f lines/s  (%s)\n' "$rf" "$(awk "BEGIN {print $FILES / $rf}")" "$(awk "BEGIN {print $LINES / $rf}")" "$(ruff --version)"
    printf 'memlint / ruff time (median of %s alternating rounds): %.2f\n' "$RUNS" "$(echo "$rounds" | awk '{print $1 / $2}' | median)"
fi
printf 'memlint check --no-project: %.3f s%s\n' "$no_project" "$(to_ruff "/ ruff" 4)"
printf 'tree-sitter parse alone, every file, every core: %.3f s%s\n' "$parse" "$(to_ruff "parse alone / ruff" 3)"
printf 'tree-sitter parse of only the %s files with findings: %.3f s%s\n' "$WITH_FINDINGS" "$floor" "$(to_ruff "/ ruff" 5)"
printf 'memlint check of only the %s files with findings (a perfect pre-filter): %.3f s%s\n' "$WITH_FINDINGS" "$oracle" "$(to_ruff "/ ruff" 6)"
printf 'tree-sitter parse of only the %s files the pre-filter lets through (%s%% of the text): %.3f s%s\n' "$PASSED" "$PASSED_TEXT" "$parse_passed" "$(to_ruff "/ ruff" 7)"
printf 'memlint check / tree-sitter parse of every file (median of %s rounds): %.2f; --no-project / parse: %.2f\n' "$RUNS" "$to_parse" "$no_project_to_parse"
printf 'over the parse of the files the pre-filter lets through: memlint check %.2f, --no-project %.2f (median of %s rounds)\n' "$(echo "$rounds" | awk '{print $1 / $7}' | median)" "$(echo "$rounds" | awk '{print $4 / $7}' | median)" "$RUNS"
printf 'project pass: memlint check takes %.0f%% more than --no-project (median of %s rounds)\n' "$project_pass" "$RUNS"
printf 'tree-sitter parse of the %s files memlint check parsed (the project pass parses %s more, for lints and summaries): %.3f s, %.0f%% over the %s files without the project; that extra parse is %.0f%% of --no-project (median of %s rounds)\n' \
    "$PROJECT_PARSED" "$((PROJECT_PARSED - PASSED))" "$(echo "$rounds" | awk '{print $8}' | median)" \
    "$(echo "$rounds" | awk '{print ($8 / $7 - 1) * 100}' | median)" "$PASSED" "$(echo "$rounds" | awk '{print ($8 - $7) / $4 * 100}' | median)" "$RUNS"
same_texts=$(echo "$rounds" | awk '{print $10}' | median)
if [[ "$same_texts" != 0 ]]; then
    printf 'tree-sitter on the %s texts both runs parsed, with the project / without (the parse itself slowed beside the project pass, or not): %.3f (median of %s rounds)\n' \
        "$same_texts" "$(echo "$rounds" | awk '{print $9}' | median)" "$RUNS"
fi
if [[ -n "$PROJECT_STATS" ]]; then
    read -r parses parsed_bytes <<< "$PROJECT_STATS"
    printf 'memlint check ran %s parses of %s bytes, %.1f%% more than the %s bytes of the %s files it parsed\n' \
        "$parses" "$parsed_bytes" "$(awk "BEGIN {print ($parsed_bytes / $PROJECT_PARSED_BYTES - 1) * 100}")" "$PROJECT_PARSED_BYTES" "$PROJECT_PARSED"
fi
PEFT_FILE=$(find "$TREE" -path '*huggingface+peft/tests/test_gpu_examples.py' -print -quit 2>/dev/null || true)
if [[ -n "$PEFT_FILE" ]]; then
    peft=$(time_runs "$MEMLINT" check --no-cache --output-format concise "$PEFT_FILE")
    printf 'memlint check %s alone (%s lines): %.3f s (median of %s runs)\n' "${PEFT_FILE#"$TREE"/}" "$(wc -l < "$PEFT_FILE")" "$peft" "$RUNS"
fi
