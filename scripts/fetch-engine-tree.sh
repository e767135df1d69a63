#!/usr/bin/env bash
# The real tree of issue 13 ("One engine"): the Python files of diffusers, pytorch-lightning,
# DeepSpeed, torchtune and peft, pinned so that figures can be compared across runs.
#
#   scripts/fetch-engine-tree.sh DIR      then   scripts/bench-check.sh DIR
#                                         and    scripts/compare-engine.sh DIR
#
# From git snapshots under $MIRROR (default /work/.mirror, where the `fetch` tool puts them:
# $MIRROR/<owner>+<name>/repo) when one is there for a library: its *.py files at the pinned
# commit (at HEAD, with a warning, when the snapshot does not hold that commit), into
# DIR/<owner>+<name>/. Otherwise from PyPI, pinned versions: the wheels of diffusers,
# pytorch-lightning, torchtune and peft, and deepspeed's sdist, into DIR/<name>/ (wheels
# hold no tests, so the tree is smaller then). Prints the source of each library and the
# file and line counts. Needs git and tar (mirrors) or python3 with pip, unzip and tar (PyPI).
set -euo pipefail
DIR=${1:?usage: fetch-engine-tree.sh DIR}
MIRROR=${MIRROR:-/work/.mirror}

# repo (owner+name)           pinned commit                              PyPI name          version  kind
LIBRARIES="
huggingface+diffusers          58eb52c0803ea9af3abec60841c2a093bdf1f951   diffusers          0.42.1   wheel
Lightning-AI+pytorch-lightning 7f0c3436cd3f6ad3753125672024fc415cbcb414   pytorch-lightning  2.6.6    wheel
deepspeedai+DeepSpeed          edaa7221267243c7be7fb49c5d5f5c4fb97b4641   deepspeed          0.19.8   sdist
pytorch+torchtune              bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1   torchtune          0.6.1    wheel
huggingface+peft               5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40   peft               0.21.2   wheel
"

count() { # files and lines of the .py files under $1
    local files lines
    files=$(find "$1" -name '*.py' -type f | wc -l)
    lines=$(find "$1" -name '*.py' -type f -print0 | xargs -0 -r cat | wc -l)
    echo "$files files, $lines lines"
}

mkdir -p "$DIR"
DOWNLOADS=$(mktemp -d)
trap 'rm -rf "$DOWNLOADS"' EXIT
while read -r repo commit package version kind; do
    [[ -n "$repo" ]] || continue
    git_dir="$MIRROR/$repo/repo"
    if git --git-dir="$git_dir" rev-parse --verify --quiet HEAD > /dev/null 2>&1; then
        rev=$commit
        if ! git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null; then
            rev=$(git --git-dir="$git_dir" rev-parse HEAD)
            echo "warning: $git_dir does not hold the pinned commit $commit; using its HEAD $rev" >&2
        fi
        rm -rf "${DIR:?}/$repo"
        mkdir -p "$DIR/$repo"
        # A snapshot may lack large non-Python blobs (images): git names each one, which is
        # harmless here; a missing .py file is an error.
        git --git-dir="$git_dir" archive "$rev" -- ':(glob)**/*.py' 2> "$DOWNLOADS/git.err" | tar -x -C "$DIR/$repo"
        if grep -q "\.py'\$" "$DOWNLOADS/git.err"; then
            cat "$DOWNLOADS/git.err" >&2
            echo "error: $git_dir lacks Python files of $rev" >&2
            exit 1
        fi
        grep -v "^error: invalid object " "$DOWNLOADS/git.err" >&2 || true
        echo "$repo: git $rev: $(count "$DIR/$repo")"
    else
        rm -rf "${DIR:?}/$package"
        mkdir -p "$DIR/$package"
        if [[ $kind == wheel ]]; then
            python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$DOWNLOADS/$package" "$package==$version"
            unzip -q -o "$DOWNLOADS/$package"/*.whl '*.py' -d "$DIR/$package"
        else
            # `pip download` of an sdist runs its build backend (deepspeed's needs torch), so
            # the sdist is taken from the index pip uses (PEP 691 JSON) and its sha256 checked.
            python3 - "$package" "$version" "$DOWNLOADS/$package.tar.gz" <<'PY'
import hashlib, json, sys, urllib.request
package, version, dest = sys.argv[1:]
request = urllib.request.Request(f"https://pypi.org/simple/{package}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(request, timeout=60) as r:
    files = json.load(r)["files"]
name = f"{package}-{version}.tar.gz"
sdist = [f for f in files if f["filename"] == name]
if not sdist:
    sys.exit(f"error: the index lists no {name}")
with urllib.request.urlopen(sdist[0]["url"], timeout=300) as r:
    data = r.read()
if hashlib.sha256(data).hexdigest() != sdist[0]["hashes"]["sha256"]:
    sys.exit(f"error: {sdist[0]['url']}: sha256 differs from the index's")
open(dest, "wb").write(data)
PY
            tar -x -z -f "$DOWNLOADS/$package.tar.gz" -C "$DIR/$package" --wildcards '*.py'
        fi
        echo "$package: PyPI $package==$version ($kind; no snapshot at $git_dir): $(count "$DIR/$package")"
    fi
done <<< "$LIBRARIES"
echo "$DIR: $(count "$DIR")"
