#!/usr/bin/env bash
# Runs every test of memlint on a fresh Debian machine (as root), installing what the
# tests need: the Rust test suite, then the real editor clients (Neovim 0.7 and 0.11,
# Emacs with eglot, VS Code's extension with its language client, and code-server driven
# by headless Chromium). CI runs exactly this script (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

step() { printf '\n==> %s\n' "$*"; }

step "cargo test --workspace"
cargo test --workspace --locked 2>&1

step "build the memlint binary the editor tests drive"
cargo build --locked -p memlint
export MEMLINT_BIN="$ROOT/target/debug/memlint"

for script in \
    tests/editors/nvim/run.sh \
    tests/editors/emacs/run.sh \
    editors/vscode/scripts/test.sh \
    tests/editors/code-server/run.sh \
    tests/packaging/run.sh \
    tests/corpus/run.sh \
    tests/bench/run.sh \
    tests/snapshot/run.sh; do
    if [[ -f "$script" ]]; then
        step "$script"
        bash "$script"
    else
        echo "error: $script is missing" >&2
        exit 1
    fi
done

step "all tests passed"
