#!/usr/bin/env bash
# Builds the `torch-memlint` wheel with maturin (bindings = "bin"), installs it in a fresh
# virtual environment with README's own install line (`pip install torch-memlint`, pointed
# at the built wheel's folder instead of PyPI), and runs the installed `memlint` on the
# bundled examples. Also checks that the distribution name is the one README, the GitHub
# Actions snippet and pyproject.toml use, and that .pre-commit-hooks.yaml names a command
# the wheel provides.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 -m venv "$WORK/build-env"
"$WORK/build-env/bin/pip" install -q "maturin>=1.5,<2"
# A dev-profile wheel: the test checks packaging, not speed.
"$WORK/build-env/bin/maturin" build --quiet --profile dev \
    -m "$ROOT/crates/memlint/Cargo.toml" --out "$WORK/dist" --target-dir "$ROOT/target"
WHEEL=$(ls "$WORK"/dist/torch_memlint-*.whl)
echo "built $(basename "$WHEEL")"

# README's install line, run as written but against the built wheel (no index).
install_line=$(grep -m1 -E '^pip install [a-z]' "$ROOT/README.md") || { echo "error: README has no 'pip install NAME' line" >&2; exit 1; }
echo "README: $install_line"
[[ "$install_line" == "pip install torch-memlint" ]] || { echo "error: README's install line is '$install_line'" >&2; exit 1; }
grep -q -- "- run: $install_line\$" "$ROOT/README.md" || { echo "error: the GitHub Actions snippet does not run '$install_line'" >&2; exit 1; }
grep -q '^name = "torch-memlint"$' "$ROOT/crates/memlint/pyproject.toml" || { echo "error: pyproject.toml's name is not torch-memlint" >&2; exit 1; }
if grep -rn "github.com/memlint/memlint" "$ROOT/README.md" "$ROOT/crates/memlint/pyproject.toml" "$ROOT/.pre-commit-hooks.yaml" "$ROOT/Cargo.toml"; then
    echo "error: a link to a project home that does not exist" >&2; exit 1
fi
python3 -m venv "$WORK/user-env"
# shellcheck disable=SC2086  # the line's words are pip's arguments
(cd "$WORK" && "$WORK/user-env/bin/pip" ${install_line#pip } -q --no-index --find-links "$WORK/dist")
MEMLINT="$WORK/user-env/bin/memlint"
test -x "$MEMLINT"
"$MEMLINT" --version
set +e
"$MEMLINT" check --no-cache --output-format concise -q "$ROOT/tests/examples" > "$WORK/out.txt"
status=$?
set -e
if [[ $status -ne 1 ]]; then
    echo "error: the installed memlint exited $status on the examples (expected 1: findings)" >&2
    exit 1
fi
grep -q "MEM001" "$WORK/out.txt" || { echo "error: no MEM001 finding from the installed memlint" >&2; cat "$WORK/out.txt"; exit 1; }
"$MEMLINT" rule eval-without-no-grad | grep -q "## Why is this bad?"

# The pre-commit hook's entry is the command the wheel installs.
entry=$(python3 - "$ROOT/.pre-commit-hooks.yaml" <<'PY'
import sys
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("entry:"):
        print(line.split(":", 1)[1].strip().split()[0]); break
PY
)
[[ "$entry" == "memlint" ]] || { echo "error: pre-commit entry is '$entry'" >&2; exit 1; }
echo "packaging: ok"
