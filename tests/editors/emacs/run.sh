#!/usr/bin/env bash
# Emacs (Debian's emacs-nox) with Eglot (elpa-eglot) against `memlint server`, in batch:
# diagnostics arrive and code actions apply. Installs what it needs (as root on Debian);
# builds nothing: the server is $MEMLINT_BIN (default target/debug/memlint).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
bin="${MEMLINT_BIN:-target/debug/memlint}"
case "$bin" in /*) ;; *) bin="$repo/$bin" ;; esac
[ -x "$bin" ] || { echo "memlint binary not found at $bin (set MEMLINT_BIN)" >&2; exit 2; }

if ! command -v emacs >/dev/null || [ ! -d /usr/share/emacs/site-lisp/elpa-src ] || ! ls -d /usr/share/emacs/site-lisp/elpa-src/eglot-* >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends emacs-nox elpa-eglot >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/train.py" "$work/train.py"
echo "== $(emacs --version | head -1)"
HOME="$work" MEMLINT_BIN="$bin" MEMLINT_TEST_FILE="$work/train.py" \
  timeout 120 emacs -Q --batch -l "$here/test.el" </dev/null
# The file on disk, as Emacs saved it after both actions.
grep -q '^        total += loss  # noqa: MEM002$' "$work/train.py"
! grep -q empty_cache "$work/train.py"
echo "emacs: 1 passed, 0 failed"
