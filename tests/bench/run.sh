#!/usr/bin/env bash
# Tests of the benchmark and comparison tools of issue 13 (run by scripts/test-all.sh):
# the stdio LSP client (latency and dump modes), scripts/compare-engine.sh (that it finds
# no difference on the fixtures and the bundled examples, and that it does find one when
# an entry point drops a finding), the scaling example, scripts/fetch-engine-tree.sh on
# local git snapshots, the single-file figure of scripts/bench-check.sh, and
# scripts/bench-output.sh, scripts/bench-rerun.sh, scripts/bench-compare.sh and
# scripts/bench-instructions.sh (valgrind, installed when missing).
# Debug builds: these check behaviour and output, not speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { printf -- '--- %s\n' "$*"; }

cargo build --locked --quiet -p memlint
cargo build --locked --quiet -p memlint_server --example stdio_latency
cargo build --locked --quiet -p memlint_linter --example scaling
MEMLINT="$ROOT/target/debug/memlint"
CLIENT="$ROOT/target/debug/examples/stdio_latency"

step "stdio_latency: latency mode on generated files and a FILE"
"$CLIENT" --memlint "$MEMLINT" --rounds 4 --warmup 1 --sizes 300 --dense-lines 200 tests/examples/train_classifier.py | tee "$TMP/latency.txt"
for label in "train_classifier x0.3k" "train_classifier x0.3k, in a def" "dense 0.2k" "tests/examples/train_classifier.py"; do
    grep -E "^$label +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ " "$TMP/latency.txt" > /dev/null || fail "no figures for $label"
    # Median, p95, min and max until the publish is read, then the p95 until it is parsed.
    grep -E "^$label( +[0-9.]+){8}$" "$TMP/latency.txt" > /dev/null || fail "no p95 parsed for $label"
done
grep -q "p95 parsed ms" "$TMP/latency.txt" || fail "the header does not name the p95 parsed column"
# The first publishDiagnostics of train_classifier.py holds its findings (6 in the CLI's count).
cli_count=$("$MEMLINT" check --no-cache --output-format json tests/examples/train_classifier.py | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' || true)
grep -E "^tests/examples/train_classifier.py +66 +$cli_count " "$TMP/latency.txt" > /dev/null ||
    fail "the latency line of train_classifier.py does not show its 66 lines and $cli_count findings"

step "stdio_latency: bad arguments are errors, not panics"
status=0; "$CLIENT" --memlint "$TMP/none" > /dev/null 2> "$TMP/err" || status=$?
[[ $status -eq 2 ]] && grep -q "no memlint binary there" "$TMP/err" || fail "a missing --memlint: status $status, $(cat "$TMP/err")"
status=0; "$CLIENT" --memlint "$MEMLINT" --rounds x > /dev/null 2> "$TMP/err" || status=$?
[[ $status -eq 2 ]] && grep -q "not a whole number" "$TMP/err" || fail "--rounds x: status $status, $(cat "$TMP/err")"

step "stdio_latency --dump: 1-based positions and fixes as the CLI gives them"
mkdir -p "$TMP/unicode"
# A non-ASCII line before the finding on the same line: UTF-16 units differ from characters.
# The loop goes over a DataLoader it builds: a parameter's name is no evidence of one.
printf 'import torch\nfrom torch.utils.data import DataLoader\ndef f(data):\n    for x in DataLoader(data):\n        s = "été😀"; torch.cuda.empty_cache()\n' > "$TMP/unicode/u.py"
"$CLIENT" --memlint "$MEMLINT" --dump "$TMP/unicode" > "$TMP/u.jsonl"
"$MEMLINT" check --no-cache --output-format json "$TMP/unicode" > "$TMP/u.json" || true
python3 - "$TMP/u.jsonl" "$TMP/u.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 1, lines
d = lines[0]
# `é` and `😀` are 1 character each for the CLI; `😀` is 2 UTF-16 units for LSP.
assert (d["code"], d["line"], d["col"], d["end_line"], d["end_col"]) == ("MEM004", 5, 21, 5, 45), d
cli = json.load(open(sys.argv[2]))
assert len(cli) == 1, cli
c = cli[0]
assert (c["location"], c["end_location"], c["fix"]) == ({"row": 5, "column": 21}, {"row": 5, "column": 45}, d["fix"]), (c, d)
PY
"$CLIENT" --memlint "$MEMLINT" --dump tests/examples/train_classifier.py > "$TMP/t.jsonl"
python3 - "$TMP/t.jsonl" <<'PY'
import json, sys
d = {x["code"]: x for x in map(json.loads, open(sys.argv[1]))}
assert d["MEM004"]["fix"] == {"applicability": "safe", "message": "Remove the `empty_cache()` call",
    "edits": [{"content": "", "location": {"row": 33, "column": 1}, "end_location": {"row": 34, "column": 1}}]}, d["MEM004"]
PY

step "compare-engine.sh: no difference on the fixtures and the bundled examples"
for tree in crates/memlint_linter/tests/fixtures tests/examples; do
    status=0
    MEMLINT="$MEMLINT" STDIO_CLIENT="$CLIENT" scripts/compare-engine.sh "$tree" > "$TMP/compare.txt" 2>&1 || status=$?
    cat "$TMP/compare.txt"
    [[ "$(tail -n 1 "$TMP/compare.txt")" == "differences: 0" ]] ||
        fail "compare-engine.sh $tree: no final 'differences: 0'"
    grep -E "^\(c\) in memlint check [1-9][0-9]*, in memlint server [1-9][0-9]*: 0 differences" "$TMP/compare.txt" > /dev/null ||
        fail "compare-engine.sh $tree: part (c) compared no findings"
    [[ $(grep -c "^(b) MEM[0-9]* in all rules' run" "$TMP/compare.txt") -ge 12 ]] || fail "compare-engine.sh $tree: part (b) did not cover every rule"
    if grep -q "part (a) NOT COMPARED: this memlint has no --no-prefilter flag yet" "$TMP/compare.txt"; then
        # Part (a) needs `memlint check --no-prefilter` (issue 13); until it exists the script
        # must say so and exit 2, which is what is checked here.
        echo "NOTE: part (a) not tested on $tree: memlint check has no --no-prefilter flag yet"
        [[ $status -eq 2 ]] || fail "compare-engine.sh $tree: exit $status without part (a), expected 2"
    else
        grep -q "^(a) with the pre-filter [1-9][0-9]*, without [1-9][0-9]*: 0 differences" "$TMP/compare.txt" || fail "compare-engine.sh $tree: part (a)"
        [[ $status -eq 0 ]] || fail "compare-engine.sh $tree: exit $status"
    fi
done

step "compare-engine.sh: a finding lost by one entry point is counted and shown"
# A memlint that loses the last finding of MEM004 when that rule is selected alone.
cat > "$TMP/lossy-memlint" <<SH
#!/usr/bin/env bash
if [[ " \$* " == *" --select MEM004 "* ]]; then
    "$MEMLINT" "\$@" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d[:-1]))'
    exit 1
fi
exec "$MEMLINT" "\$@"
SH
chmod +x "$TMP/lossy-memlint"
status=0
MEMLINT="$TMP/lossy-memlint" STDIO_CLIENT="$CLIENT" scripts/compare-engine.sh tests/examples > "$TMP/compare.txt" 2>&1 || status=$?
cat "$TMP/compare.txt"
[[ $status -ne 0 ]] || fail "compare-engine.sh exited 0 with a difference"
grep -q "^differences: 1$" "$TMP/compare.txt" || fail "compare-engine.sh did not count the lost finding"
grep -q "^(b) MEM004 only in all rules' run: train_classifier.py:33:9 MEM004" "$TMP/compare.txt" || fail "compare-engine.sh did not show the lost finding"

step "scaling example"
"$ROOT/target/debug/examples/scaling" --sizes 100,400 --budget-ms 20 | tee "$TMP/scaling.txt"
[[ $(grep -cE "^(distinct|same names) +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+$" "$TMP/scaling.txt") -eq 4 ]] || fail "scaling: not 4 figures"
grep -q "^distinct: per-1k time from .* largest / smallest = [0-9.]*" "$TMP/scaling.txt" || fail "scaling: no ratio"
status=0; "$ROOT/target/debug/examples/scaling" --sizes 0 > /dev/null 2>&1 || status=$?
[[ $status -eq 2 ]] || fail "scaling --sizes 0: status $status"

step "fetch-engine-tree.sh from local git snapshots"
for repo in huggingface+diffusers Lightning-AI+pytorch-lightning deepspeedai+DeepSpeed pytorch+torchtune huggingface+peft; do
    work="$TMP/src/$repo"
    mkdir -p "$work/tests" "$work/docs"
    printf 'import torch\nfrom torch.utils.data import DataLoader\n\ndef f(data):\n    for x in DataLoader(data):\n        torch.cuda.empty_cache()\n' > "$work/tests/test_gpu_examples.py"
    echo "not python" > "$work/docs/notes.md"
    git -C "$work" init --quiet
    git -C "$work" add -A
    git -C "$work" -c user.name=t -c user.email=t@t commit --quiet -m snapshot
    mkdir -p "$TMP/mirror/$repo"
    git clone --quiet --bare "$work" "$TMP/mirror/$repo/repo"
done
MIRROR="$TMP/mirror" scripts/fetch-engine-tree.sh "$TMP/tree" > "$TMP/fetch.txt" 2> "$TMP/fetch.err"
cat "$TMP/fetch.txt" "$TMP/fetch.err"
grep -q "^huggingface+peft: git [0-9a-f]\{40\}: 1 files, 6 lines$" "$TMP/fetch.txt" || fail "fetch-engine-tree.sh: peft line"
grep -q ": 5 files, 30 lines$" "$TMP/fetch.txt" || fail "fetch-engine-tree.sh: total line"
grep -q "does not hold the pinned commit" "$TMP/fetch.err" || fail "fetch-engine-tree.sh: no warning for a snapshot without the pinned commit"
[[ ! -e "$TMP/tree/huggingface+peft/docs/notes.md" ]] || fail "fetch-engine-tree.sh copied a non-Python file"

step "bench-check.sh: the single peft file"
MEMLINT="$MEMLINT" scripts/bench-check.sh "$TMP/tree" 1 | tee "$TMP/bench.txt"
grep -q "^memlint check huggingface+peft/tests/test_gpu_examples.py alone (6 lines): [0-9.]* s (median of 1 runs)$" "$TMP/bench.txt" ||
    fail "bench-check.sh did not time the peft file alone"
grep -qE "^tree-sitter parse alone, every file, every core: [0-9.]+ s" "$TMP/bench.txt" ||
    fail "bench-check.sh did not time the parse alone"
# The floor: only the files memlint reports in (each file of the tree has a MEM004 finding).
grep -qE "^tree-sitter parse of only the [1-9][0-9]* files with findings: [0-9.]+ s" "$TMP/bench.txt" ||
    fail "bench-check.sh did not time the parse of the files with findings"
# And the whole engine on only those files: what a perfect pre-filter would cost.
grep -qE "^memlint check of only the [1-9][0-9]* files with findings \(a perfect pre-filter\): [0-9.]+ s" "$TMP/bench.txt" ||
    fail "bench-check.sh did not time memlint on the files with findings"
# The floor under the pre-filter as it is: the files it lets through, and memlint over them.
grep -qE "^tree-sitter parse of only the [0-9]+ files the pre-filter lets through \([0-9.]+% of the text\): [0-9.]+ s" "$TMP/bench.txt" ||
    fail "bench-check.sh did not time the parse of the files the pre-filter lets through"
grep -qE "^over the parse of the files the pre-filter lets through: memlint check [0-9.]+, --no-project [0-9.]+ \(median of 1 rounds\)$" "$TMP/bench.txt" ||
    fail "bench-check.sh did not print memlint over the parse of the files the pre-filter lets through"
# The same-run ratios of issue 31: memlint against its parse floor, the project pass.
grep -qE "^memlint check / tree-sitter parse of every file \(median of 1 rounds\): [0-9.]+; --no-project / parse: [0-9.]+$" "$TMP/bench.txt" ||
    fail "bench-check.sh did not print memlint / parse"
grep -qE "^project pass: memlint check takes -?[0-9]+% more than --no-project \(median of 1 rounds\)$" "$TMP/bench.txt" ||
    fail "bench-check.sh did not print the project pass's share"
# The parse the project run cannot avoid, beside the parse without the project.
grep -qE "^tree-sitter parse of the [1-9][0-9]* files memlint check parsed \(the project pass parses -?[0-9]+ more, for lints and summaries\): [0-9.]+ s, -?[0-9]+% over the [0-9]+ files without the project; that extra parse is -?[0-9]+% of --no-project \(median of 1 rounds\)$" "$TMP/bench.txt" ||
    fail "bench-check.sh did not time the parse of the files the project run parsed"
grep -qE "^the same over --no-project writing its results too \([0-9.]+ s\): -?[0-9]+% \(median of 1 rounds\)$" "$TMP/bench.txt" ||
    fail "bench-check.sh did not print the re-run with summaries cached over --no-project writing its results"
[[ ! -e "$TMP/tree/.memlint_cache_no_project" ]] || fail "bench-check.sh left the --no-project cache in the tree"

step "bench-rerun.sh: a re-run after one file changed, with and without kept summaries"
MEMLINT="$MEMLINT" scripts/bench-rerun.sh "$TMP/tree" "$TMP/tree/huggingface+peft/tests/test_gpu_examples.py" 1 | tee "$TMP/rerun.txt"
grep -qE "^tree: .* \(5 files\), changed file: huggingface\+peft/tests/test_gpu_examples.py, cores: [0-9]+$" "$TMP/rerun.txt" || fail "bench-rerun.sh: no tree line"
for label in "cold, empty cache" "unchanged \(every result reused\)" "one file changed, summaries not kept" "one file changed, summaries kept"; do
    grep -qE "^$label +[0-9.]+ s$" "$TMP/rerun.txt" || fail "bench-rerun.sh: no figure for $label"
done
grep -qE "^kept / not kept +[0-9.]+$" "$TMP/rerun.txt" || fail "bench-rerun.sh: no ratio"
[[ -z "$(tail -c 200 "$TMP/tree/huggingface+peft/tests/test_gpu_examples.py" | grep 'bench-rerun edit')" ]] || fail "bench-rerun.sh edited the tree it was given, not its copy"
status=0; scripts/bench-rerun.sh "$TMP/tree" README.md > /dev/null 2> "$TMP/err" || status=$?
[[ $status -eq 2 ]] && grep -q "is not inside" "$TMP/err" || fail "bench-rerun.sh with a file outside the tree: status $status, $(cat "$TMP/err")"

step "bench-output.sh: the output formats timed on a small dense file"
MEMLINT="$MEMLINT" STDIO_CLIENT="$CLIENT" scripts/bench-output.sh 300 1 | tee "$TMP/output.txt"
grep -qE "^dense file: [0-9]+ lines, [1-9][0-9]* findings; median of 1 runs" "$TMP/output.txt" || fail "bench-output.sh: no file line"
[[ $(grep -cE "^(concise|text|json) +[0-9.]+ s$" "$TMP/output.txt") -eq 3 ]] || fail "bench-output.sh: not 3 formats"
grep -qE "^text / concise: [0-9.]+$" "$TMP/output.txt" || fail "bench-output.sh: no ratio"

step "bench-compare.sh: two builds in alternating rounds"
scripts/bench-compare.sh "$MEMLINT" "$MEMLINT" tests/examples 2 | tee "$TMP/compare.txt"
for name in "memlint check" "memlint check --no-project"; do
    grep -qE "^$name: wall [0-9.]+ -> [0-9.]+ s \(([+-][0-9.]+%|n/a)\), CPU [0-9.]+ -> [0-9.]+ s \(([+-][0-9.]+%|n/a)\)$" "$TMP/compare.txt" || fail "bench-compare.sh: no figures for $name"
done
grep -q "tree: tests/examples, 2 alternating rounds" "$TMP/compare.txt" || fail "bench-compare.sh: no tree line"
status=0; scripts/bench-compare.sh "$MEMLINT" "$TMP/none" tests/examples > /dev/null 2> "$TMP/err" || status=$?
[[ $status -eq 2 ]] && grep -q "is not an executable" "$TMP/err" || fail "bench-compare.sh with a missing build: status $status, $(cat "$TMP/err")"

step "bench-instructions.sh: instructions, and with --cache simulated misses, of two builds"
if ! command -v valgrind > /dev/null; then
    echo "valgrind is not installed: installing it (apt-get install valgrind)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind > /dev/null
fi
mkdir -p "$TMP/one"
cp tests/examples/train_classifier.py "$TMP/one/"
scripts/bench-instructions.sh "$MEMLINT" "$TMP/one" | tee "$TMP/instructions.txt"
grep -qE " check: [0-9,]+ instructions$" "$TMP/instructions.txt" || fail "bench-instructions.sh: no count for check"
grep -qE ": the project pass, [+-][0-9.]+% instructions against --no-project$" "$TMP/instructions.txt" || fail "bench-instructions.sh: no project pass"
! grep -q "misses" "$TMP/instructions.txt" || fail "bench-instructions.sh: misses without --cache"
scripts/bench-instructions.sh --cache "$MEMLINT" "$MEMLINT" "$TMP/one" | tee "$TMP/cache.txt"
grep -qE "^simulated: D1 [0-9]+,[0-9]+,[0-9]+, L2 [0-9]+,[0-9]+,[0-9]+ " "$TMP/cache.txt" || fail "bench-instructions.sh --cache: no simulated caches"
for event in instructions "mispredicted branches" "D1 misses" "L2 misses"; do
    [[ $(grep -cE " check( --no-project)?: [0-9,]+ $event$" "$TMP/cache.txt") -eq 4 ]] || fail "bench-instructions.sh --cache: not 4 counts of $event"
    [[ $(grep -cE "^B against A, check( --no-project)?: [+-][0-9.]+% $event$" "$TMP/cache.txt") -eq 2 ]] || fail "bench-instructions.sh --cache: no change of $event"
done
status=0; scripts/bench-instructions.sh --cache "$TMP/one" > /dev/null 2> "$TMP/err" || status=$?
[[ $status -eq 2 ]] && grep -q "usage" "$TMP/err" || fail "bench-instructions.sh without a build: status $status, $(cat "$TMP/err")"

echo "benchmark tools: all tests passed"
