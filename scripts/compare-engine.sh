#!/usr/bin/env bash
# Do memlint's entry points agree? Issue 13's acceptance, on a tree (TREE: a folder or file):
#   (a) `memlint check --no-cache --output-format json` with and without the pre-filter
#       (the hidden flag `--no-prefilter`), every finding's whole JSON, fixes included;
#   (b) every rule selected alone (`--select MEMxxx`) versus all rules' findings filtered
#       to that rule, whole JSON;
#   (c) the CLI versus the language server: `memlint server` driven over stdio
#       (crates/memlint_server/examples/stdio_latency.rs --dump), code, message, severity,
#       1-based range, fix and evidence (the facts with a place: the server's
#       relatedInformation) of each finding.
# Prints each difference (the first 20 of each part), then a last line `differences: N`.
#
#   scripts/compare-engine.sh TREE            (scripts/fetch-engine-tree.sh DIR makes the real tree)
#
# MEMLINT=PATH compares that binary (default: built here, target/release/memlint);
# STDIO_CLIENT=PATH uses that build of the stdio client (default: built here).
# Exit status: 0 when N is 0 and every part ran, 1 when there are differences, 2 when a
# part could not run (a memlint without `--no-prefilter`, a failing command).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TREE=${1:?usage: compare-engine.sh TREE}
[[ -e "$TREE" ]] || { echo "error: $TREE: no such file or folder" >&2; exit 2; }
if [[ -z "${MEMLINT:-}" ]]; then
    cargo build --release --quiet -p memlint --manifest-path "$ROOT/Cargo.toml"
    MEMLINT="$ROOT/target/release/memlint"
fi
# A relative path still names the binary once `check` runs in the tree's folder.
[[ "$MEMLINT" != */* ]] || MEMLINT=$(realpath "$MEMLINT")
if [[ -z "${STDIO_CLIENT:-}" ]]; then
    cargo build --release --quiet -p memlint_server --example stdio_latency --manifest-path "$ROOT/Cargo.toml"
    STDIO_CLIENT="$ROOT/target/release/examples/stdio_latency"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FAILED=()

# `memlint check` as JSON into $1 (the other arguments go to memlint); false when memlint
# failed (exit status other than 0 and 1), with its error output in $1.err. It runs in the
# tree's folder, as a user in that project would and as the server's workspace root is
# (the current folder is an import root of `memlint check`: from elsewhere, imports of the
# tree's own packages would not resolve and the two would differ for that reason alone).
TREE_ABS=$(realpath "$TREE")
if [[ -d "$TREE_ABS" ]]; then TREE_DIR=$TREE_ABS; else TREE_DIR=$(dirname "$TREE_ABS"); fi
check() {
    local out=$1 status=0
    shift
    (cd "$TREE_DIR" && "$MEMLINT" check --no-cache --output-format json "$@" "$TREE_ABS") > "$out" 2> "$out.err" || status=$?
    [[ $status -le 1 ]]
}

echo "tree: $TREE ($MEMLINT)"
check "$WORK/all.json" || { echo "error: memlint check failed:" >&2; cat "$WORK/all.json.err" >&2; exit 2; }

# (a) with and without the pre-filter.
if check "$WORK/unfiltered.json" --no-prefilter; then
    PART_A="$WORK/unfiltered.json"
else
    PART_A=
    if grep -q -- "--no-prefilter" "$WORK/unfiltered.json.err"; then
        echo "part (a) NOT COMPARED: this memlint has no --no-prefilter flag yet (\`memlint check --no-prefilter\` says:" \
            "$(grep -m1 -- "--no-prefilter" "$WORK/unfiltered.json.err" | sed 's/^ *//'))"
    else
        echo "part (a) NOT COMPARED: memlint check --no-prefilter failed:"
        cat "$WORK/unfiltered.json.err"
    fi
    FAILED+=("(a)")
fi

# (b) every rule alone. `unused-noqa` (MEM013) is left out: it judges suppression comments
# by the findings of the other enabled rules, so alone it reports every other code as
# non-enabled, by design (crates/memlint_linter/tests/engine.rs tests it on its own).
CODES=$("$MEMLINT" rule --all | sed -n 's/^# .* (\(MEM[0-9]*\))$/\1/p' | grep -v '^MEM013$')
[[ -n "$CODES" ]] || { echo "error: \`memlint rule --all\` listed no rule codes" >&2; exit 2; }
echo "part (b) leaves out MEM013 (unused-noqa): alone, it reports the other rules' codes as non-enabled, by design"
for code in $CODES; do
    if ! check "$WORK/alone-$code.json" --select "$code"; then
        echo "part (b) NOT COMPARED for $code: memlint check --select $code failed:"
        cat "$WORK/alone-$code.json.err"
        FAILED+=("(b) $code")
    fi
done

# (c) the language server.
if ! "$STDIO_CLIENT" --memlint "$MEMLINT" --dump "$TREE" > "$WORK/server.jsonl" 2> "$WORK/server.err"; then
    echo "part (c) NOT COMPARED: the stdio client failed:"
    cat "$WORK/server.err"
    FAILED+=("(c)")
    : > "$WORK/server.jsonl"
    SERVER_OK=0
else
    SERVER_OK=1
fi

if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "error: not compared: ${FAILED[*]} (the count below leaves them out; exit status 2)" >&2
fi
status=0
python3 - "$TREE" "$WORK" "$PART_A" "$SERVER_OK" $CODES <<'PY' || status=$?
import collections, json, os, sys

tree, work, part_a, server_ok, codes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5:]
SHOWN = 20

def rel(path):
    return os.path.relpath(os.path.realpath(path), os.path.realpath(tree) if os.path.isdir(tree) else os.path.dirname(os.path.realpath(tree)))

def load(path):
    with open(path) as f:
        entries = json.load(f)
    for e in entries:
        e["filename"] = rel(e["filename"])
    return entries

def key(entry):
    return json.dumps(entry, sort_keys=True)

def where(e):
    if "filename" in e:
        return f'{e["filename"]}:{e["location"]["row"]}:{e["location"]["column"]} {e["code"] or e["name"]}'
    return f'{e["path"]}:{e["line"]}:{e["col"]} {e["code"]}'

def compare(part, left_name, left, right_name, right):
    """Differences between two lists of findings, as multisets of their whole JSON."""
    lc, rc = collections.Counter(map(key, left)), collections.Counter(map(key, right))
    diffs = []
    for k in sorted(set(lc) | set(rc)):
        extra = lc[k] - rc[k]
        e = json.loads(k)
        if extra > 0:
            diffs += [f"{part} only {left_name}: {where(e)}: {k}"] * extra
        elif extra < 0:
            diffs += [f"{part} only {right_name}: {where(e)}: {k}"] * -extra
    for d in diffs[:SHOWN]:
        print(d)
    if len(diffs) > SHOWN:
        print(f"{part} ... and {len(diffs) - SHOWN} more")
    print(f"{part} {left_name} {len(left)}, {right_name} {len(right)}: {len(diffs)} differences")
    return len(diffs)

everything = load(os.path.join(work, "all.json"))
findings = [e for e in everything if e["code"] is not None]
problems = collections.Counter(e["name"] for e in everything if e["code"] is None)
print(f"memlint check: {len(findings)} findings in {len({e['filename'] for e in findings})} files"
      + (f"; not compared: {dict(problems)}" if problems else ""))
total = 0
if part_a:
    total += compare("(a)", "with the pre-filter", findings, "without", [e for e in load(part_a) if e["code"] is not None])
for code in codes:
    path = os.path.join(work, f"alone-{code}.json")
    if os.path.exists(path) and os.path.getsize(path) > 0:
        total += compare(f"(b) {code}", "in all rules' run", [e for e in findings if e["code"] == code], "selected alone", load(path))

if server_ok:
    def from_cli(e):
        fix = e["fix"] and {"applicability": e["fix"]["applicability"], "message": e["fix"]["message"], "edits": e["fix"]["edits"]}
        return {"path": e["filename"], "code": e["code"], "message": e["message"], "severity": e["severity"],
                "line": e["location"]["row"], "col": e["location"]["column"],
                "end_line": e["end_location"]["row"], "end_col": e["end_location"]["column"], "fix": fix,
                "evidence": [{"message": f["message"], "location": f["location"], "end_location": f["end_location"]}
                             for f in e.get("evidence", []) if f["location"] is not None]}
    served = []
    with open(os.path.join(work, "server.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            d.pop("name", None)
            d["path"] = rel(d["path"])
            served.append(d)
    # The stdio client opens `.py` files only (a notebook is synced cell by cell, see
    # crates/memlint_server/tests/protocol.rs): the CLI's notebook findings are left out.
    in_files = [e for e in findings if not e["filename"].endswith(".ipynb")]
    if len(in_files) < len(findings):
        print(f"part (c) leaves out {len(findings) - len(in_files)} findings in notebooks: the stdio client opens .py files only")
    total += compare("(c)", "in memlint check", [from_cli(e) for e in in_files], "in memlint server", served)
print(f"differences: {total}")
sys.exit(1 if total else 0)
PY
[[ ${#FAILED[@]} -eq 0 ]] || exit 2
exit $status
