#!/usr/bin/env python3
"""Materialize the labelled corpus of memlint from local git snapshots.

The corpus manifest (manifest.csv beside this script) names files of public GitHub
repositories at exact commits. This script never downloads anything: it reads the
snapshots that the `fetch` tool brought to the mirror folder (default /work/.mirror,
or $MEMLINT_CORPUS_MIRROR, or --mirror), whose layout is

    <mirror>/<owner>+<name>/repo/.git     (a clone with a work tree), or
    <mirror>/<owner>+<name>/repo          (a bare git directory)

and writes the files into

    <out>/<owner>__<name>/<path>

By default it writes every Python file of each repository at the labelled commit (so that a
linter resolving the project's own imports sees the sibling modules), plus the labelled files
themselves; --labelled-only writes only the labelled files. When a repository or a commit is
missing from the mirror it says which ones to bring and exits with status 2 (nothing is
pretended: no file is written for a missing repository).

Exit status: 0 all written, 2 usage error, missing snapshot or I/O error.
"""
from __future__ import annotations

import argparse
import csv
import re
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_MANIFEST = HERE / "manifest.csv"
COLUMNS = ["repo", "commit", "path", "line", "rule", "verdict", "reason", "split"]


class CorpusError(Exception):
    pass


# A fresh sample (issue 32): repositories judged as the build before a round of rule
# changes found them, kept apart from the seeded dev/holdout split.
FRESH_SPLIT = re.compile(r"fresh-[0-9]+")


def read_manifest(path: Path) -> list[dict]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != COLUMNS:
                raise CorpusError(
                    f"{path}: header must be {','.join(COLUMNS)}, found {','.join(reader.fieldnames or [])}"
                )
            rows = list(reader)
    except OSError as e:
        raise CorpusError(f"{path}: cannot read the manifest: {e.strerror}") from e
    for n, row in enumerate(rows, start=2):
        if any(row.get(c) in (None, "") for c in COLUMNS):
            raise CorpusError(f"{path}:{n}: every column must be filled: {row}")
        if row["repo"].count("/") != 1:
            raise CorpusError(f"{path}:{n}: repo must be owner/name, found {row['repo']!r}")
        if not row["line"].isdigit() or int(row["line"]) < 1:
            raise CorpusError(f"{path}:{n}: line must be a positive integer, found {row['line']!r}")
        if row["verdict"] not in ("positive", "negative"):
            raise CorpusError(f"{path}:{n}: verdict must be positive or negative, found {row['verdict']!r}")
        if row["split"] not in ("dev", "holdout") and not FRESH_SPLIT.fullmatch(row["split"]):
            raise CorpusError(f"{path}:{n}: split must be dev, holdout or fresh-N (a fresh sample), found {row['split']!r}")
        if len(row["commit"]) != 40:
            raise CorpusError(f"{path}:{n}: commit must be a full 40-digit hash, found {row['commit']!r}")
    return rows


def git_dir(mirror: Path, repo: str) -> Path | None:
    base = mirror / repo.replace("/", "+") / "repo"
    for candidate in (base / ".git", base):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def git(gdir: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", f"--git-dir={gdir}", *args], capture_output=True)
    if proc.returncode != 0:
        raise CorpusError(f"git {' '.join(args)} in {gdir}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def has_commit(gdir: Path, commit: str) -> bool:
    proc = subprocess.run(
        ["git", f"--git-dir={gdir}", "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    )
    return proc.returncode == 0


def out_dir_name(repo: str) -> str:
    return repo.replace("/", "__")


def materialize(rows: list[dict], mirror: Path, out: Path, labelled_only: bool) -> int:
    wanted: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        wanted.setdefault((row["repo"], row["commit"]), set()).add(row["path"])
    missing = []
    gdirs = {}
    for repo, commit in sorted(wanted):
        gdir = git_dir(mirror, repo)
        if gdir is None:
            missing.append(f"{repo} (no snapshot under {mirror / repo.replace('/', '+')})")
        elif not has_commit(gdir, commit):
            missing.append(f"{repo} (snapshot {gdir} lacks commit {commit})")
        else:
            gdirs[(repo, commit)] = gdir
    if missing:
        print(
            f"error: {len(missing)} of {len(wanted)} corpus repositories are not in the mirror {mirror}.\n"
            "Bring each with the `fetch` tool (github:<owner>/<name>); this script cannot download them:",
            file=sys.stderr,
        )
        for m in missing:
            print(f"  {m}", file=sys.stderr)
        return 2
    plans = []
    for (repo, commit), paths in sorted(wanted.items()):
        gdir = gdirs[(repo, commit)]
        tree = set(git(gdir, "ls-tree", "-r", "--name-only", "-z", commit).decode().split("\0"))
        absent = sorted(paths - tree)
        if absent:
            raise CorpusError(f"{repo}@{commit[:12]}: labelled file {absent[0]} is not in that commit")
        files = set(paths) if labelled_only else paths | {p for p in tree if p.endswith(".py")}
        plans.append((repo, commit, gdir, sorted(files)))
    written = 0
    for repo, commit, gdir, files in plans:
        for p in files:
            data = git(gdir, "show", f"{commit}:{p}")
            dest = out / out_dir_name(repo) / p
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            written += 1
    print(f"wrote {written} files of {len(wanted)} repositories under {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to write <owner>__<name>/<path> into")
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST, help="default: %(default)s")
    ap.add_argument(
        "--mirror",
        type=Path,
        default=Path(os.environ.get("MEMLINT_CORPUS_MIRROR", "/work/.mirror")),
        help="folder of fetched snapshots (default: $MEMLINT_CORPUS_MIRROR or /work/.mirror)",
    )
    ap.add_argument("--labelled-only", action="store_true", help="write only the labelled files")
    args = ap.parse_args(argv)
    try:
        rows = read_manifest(args.manifest)
        return materialize(rows, args.mirror, args.out, args.labelled_only)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
