#!/usr/bin/env bash
# Runs every test of memlint on a fresh Debian machine (as root), installing what the
# tests need: the Rust test suite, then the real editor clients (Neovim 0.7 and 0.11,
# Emacs with eglot, VS Code's extension with its language client, and code-server driven
# by headless Chromium), the Python wheel, the corpus scripts, the benchmark scripts and the
# snapshot page. CI runs exactly this script (.ci/run).
#
# Every step runs, whatever happened to the ones before it (and a failing Rust test binary
# does not stop the others: --no-fail-fast); the run ends with a table of the steps
# (passed / failed / skipped, and how long each took) and exits 0 only when every step
# passed. A step that drives the memlint binary is skipped, and counted as not passed,
# when the binary could not be built.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
source scripts/lib/steps.sh

# One build from nothing, as in CI: cargo's incremental files (5 GB for this workspace)
# would never be read again, and full debug info in every test binary doubles what is left.
# Line tables keep the file and line of a panic's backtrace. A CI run once failed with its
# disk full; the free space is printed before and after.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
df -h . | sed 's/^/disk: /'

run_script() {
    if [[ -f "$1" ]]; then
        bash "$1"
    else
        echo "error: $1 is missing" >&2
        return 1
    fi
}

run_step "cargo test --workspace" cargo test --workspace --locked --no-fail-fast

built=0
run_step "build the memlint binary" cargo build --locked -p memlint && built=1
export MEMLINT_BIN="$ROOT/target/debug/memlint"

run_step "tests/readme/quickstart.sh" run_script tests/readme/quickstart.sh

for script in \
    tests/editors/nvim/run.sh \
    tests/editors/emacs/run.sh \
    editors/vscode/scripts/test.sh \
    tests/editors/code-server/run.sh \
    tests/packaging/run.sh \
    tests/corpus/run.sh \
    tests/bench/run.sh \
    tests/snapshot/run.sh; do
    if [[ $built -eq 1 || $script == tests/packaging/run.sh ]]; then
        run_step "$script" run_script "$script"
    else
        skip_step "$script" "the memlint binary did not build"
    fi
done

df -h . | sed 's/^/disk: /'
du -sh target 2>/dev/null | sed 's/^/disk: the build takes /'
summary
