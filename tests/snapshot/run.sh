#!/usr/bin/env bash
# `memlint snapshot --format html` in a real browser: renders the page of a snapshot
# recorded on an H100 (tests/snapshot/data) in Debian's headless Chromium with networking
# off, checks the rendered DOM (chart, peak, tables, links to memlint's findings) and saves
# a screenshot to <repo>/target/test-artifacts/snapshot-page.png; then the page of the
# batch model (--budget: the predicted curve) and its screenshot, snapshot-batch-page.png. Installs chromium as root
# when it is missing. MEMLINT_BIN: the memlint binary (default <repo>/target/debug/memlint).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
MEMLINT_BIN="${MEMLINT_BIN:-$repo_root/target/debug/memlint}"
artifacts="$repo_root/target/test-artifacts"
mkdir -p "$artifacts"

if [[ ! -x "$MEMLINT_BIN" ]]; then
    echo "memlint binary not found at $MEMLINT_BIN (cargo build -p memlint, or set MEMLINT_BIN)" >&2
    exit 1
fi
if ! command -v chromium >/dev/null; then
    if [[ "$(id -u)" != 0 ]]; then
        echo "chromium is missing and installing it needs root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
page="$artifacts/snapshot-page.html"
"$MEMLINT_BIN" snapshot "$here/data/retain_graph_bad.pickle" --source "$here/scripts" --format html -o "$page"

# self-contained: nothing to fetch. Elements that load (script, img, link, iframe, …) must
# not point anywhere, and CSS must not pull urls; `<a href>` links to rule docs load nothing.
loads=$(grep -Eo '<(script|img|link|iframe|source|video|audio|embed|object)[^>]*(src|href|data)="[^"#][^"]*"' "$page" | grep -v '="data:' || true)
loads+=$(grep -Eo 'url\((["'"'"']?)[a-z]+:' "$page" | grep -v 'url(["'"'"']\?data:' || true)
if [[ -n "$loads" ]]; then
    echo "the page loads something: $(echo "$loads" | head -3)" >&2
    exit 1
fi
if grep -Eq '<(script|link|img|iframe)' "$page"; then
    echo "the page has a script, link, img or iframe" >&2
    exit 1
fi

flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --disable-sync --no-first-run --user-data-dir="$work/profile" --window-size=1100,1400)
chromium "${flags[@]}" --dump-dom "file://$page" >"$work/dom.html" 2>"$work/chromium.log" || { cat "$work/chromium.log" >&2; exit 1; }
chromium "${flags[@]}" --screenshot="$artifacts/snapshot-page.png" "file://$page" 2>>"$work/chromium.log" || { cat "$work/chromium.log" >&2; exit 1; }

fail() { echo "snapshot page: $*" >&2; cp "$work/dom.html" "$artifacts/snapshot-page.dom.html"; exit 1; }
grep -q '<svg id="chart-0"' "$work/dom.html" || fail "no chart"
[[ $(grep -o '<polygon class="stack"' "$work/dom.html" | wc -l) -ge 3 ]] || fail "fewer than 3 stacked lines"
grep -q 'polyline class="allocated"' "$work/dom.html" || fail "no allocated curve"
grep -q 'peak 114.3 MiB' "$work/dom.html" || fail "the peak (max_memory_allocated 119811584 B) is not marked"
grep -q 'class="retained"' "$work/dom.html" || fail "no retained table"
grep -q '_model.py:14</code>' "$work/dom.html" || fail "the activation line is not listed"
# a line of the script that memlint reports links to that finding, which is on the page
link=$(grep -o 'href="#finding-[0-9]*"' "$work/dom.html" | head -1 | sed 's/href="#//; s/"//')
[[ -n "$link" ]] || fail "no line links to a finding"
grep -q "id=\"$link\"" "$work/dom.html" || fail "the link $link goes nowhere"
# the chart: <no user code> (autograd's backward) has its area and legend entry, the time axis
# its labels, the peak its time since the start; every finding of the files is listed
grep -q 'fill="#9c755f"' "$work/dom.html" || fail "no area for <no user code>"
grep -q "&lt;no user code&gt; (autograd's backward)" "$work/dom.html" || fail "no legend entry for <no user code>"
[[ $(grep -o 'class="label tick-label"' "$work/dom.html" | wc -l) -ge 3 ]] || fail "the time axis has no labels"
grep -q 'peak 114.3 MiB at 4.74 s' "$work/dom.html" || fail "the peak's time since the start is not shown"
grep -q 'retain_graph_bad.py:16</code> MEM002' "$work/dom.html" || fail "MEM002 on losses.append(loss) is not listed"
# the batch model's page: the curve, the budget line, the recorded point
batch_page="$artifacts/snapshot-batch-page.html"
"$MEMLINT_BIN" snapshot "$here/data/batch/gpt2_b16.pickle" --budget 10GiB --format html -o "$batch_page"
chromium "${flags[@]}" --dump-dom "file://$batch_page" >"$work/batch.html" 2>>"$work/chromium.log" || { cat "$work/chromium.log" >&2; exit 1; }
chromium "${flags[@]}" --screenshot="$artifacts/snapshot-batch-page.png" "file://$batch_page" 2>>"$work/chromium.log" || { cat "$work/chromium.log" >&2; exit 1; }
for needle in '<svg id="batch-curve"' 'class="predicted-allocated"' 'class="budget"' '<circle class="recorded"' 'largest that fits: 34'; do
    grep -q "$needle" "$work/batch.html" || { cp "$work/batch.html" "$artifacts/snapshot-batch-page.dom.html"; echo "snapshot batch page: no $needle" >&2; exit 1; }
done
size=$(stat -c %s "$artifacts/snapshot-page.png")
(( size > 20000 )) || fail "the screenshot is nearly empty ($size bytes)"
echo "snapshot page: ok (screenshot $artifacts/snapshot-page.png, $size bytes)"
