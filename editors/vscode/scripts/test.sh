#!/usr/bin/env bash
# Builds, checks, packages and tests the VS Code extension against a built memlint.
# Usage: editors/vscode/scripts/test.sh   (MEMLINT_BIN: the memlint binary; default
# <repo>/target/debug/memlint — this script never builds Rust). Exits non-zero on failure.
set -euo pipefail

ext_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_root="$(cd "$ext_dir/../.." && pwd)"
export MEMLINT_BIN="${MEMLINT_BIN:-$repo_root/target/debug/memlint}"

step() { printf '\n== %s\n' "$*"; }

if [[ ! -x "$MEMLINT_BIN" ]]; then
    echo "memlint binary not found at $MEMLINT_BIN (build it with cargo build -p memlint, or set MEMLINT_BIN)" >&2
    exit 1
fi

# Node 18+ and npm: the machine's, else Debian's; python3 checks the .vsix's contents.
debs=()
command -v node >/dev/null && command -v npm >/dev/null || debs+=(nodejs npm)
command -v python3 >/dev/null || debs+=(python3)
if (( ${#debs[@]} > 0 )); then
    step "apt-get install ${debs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if (( node_major < 18 )); then
    echo "Node.js $(node --version) is too old; 18 or later is needed" >&2
    exit 1
fi

cd "$ext_dir"
step "npm ci"
npm ci --no-audit --no-fund --loglevel=error

step "compile (esbuild bundle)"
npm run --silent compile

step "typecheck"
npm run --silent typecheck

step "lint"
npm run --silent lint

step "package (.vsix, offline: --no-dependencies, the bundle carries the client)"
rm -f memlint.vsix
npm run --silent package
# The package must hold the manifest and the bundle, and nothing from node_modules or src.
python3 - memlint.vsix <<'PY'
import json, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
required = {"extension.vsixmanifest", "extension/package.json", "extension/out/extension.js",
            "extension/readme.md", "extension/LICENSE.txt"}
missing = required - set(names)
stray = [n for n in names if n.startswith(("extension/node_modules/", "extension/src/", "extension/test/"))]
manifest = json.loads(zipfile.ZipFile(sys.argv[1]).read("extension/package.json"))
if missing or stray or manifest["main"] != "./out/extension.js":
    sys.exit(f"bad .vsix: missing {sorted(missing)}, stray {stray[:5]}, main {manifest['main']}")
print(f"memlint.vsix: {len(names)} files: {', '.join(sorted(names))}")
PY

step "node tests (built extension, stub vscode, real vscode-languageclient, $MEMLINT_BIN server)"
# Each file runs in its own process; the per-test timeouts are in the files.
node --test --test-reporter=spec test/*.test.js
