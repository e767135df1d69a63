#!/usr/bin/env python3
"""Measure memlint's precision and recall on the labelled corpus.

Materializes the corpus (see materialize.py) unless --tree names an already materialized
folder, runs `memlint check --output-format json --no-cache --isolated` on it, and matches
every finding in a labelled file to the labels by (repo, path, line, rule):

- TP: a finding on a `positive` label;
- FP: a finding on a `negative` label, or a finding in a labelled file with no label at all
  (listed as "unlabelled findings": the protocol says each must get a label);
- FN: a `positive` label with no finding.

precision = TP / (TP + FP), recall = TP / (TP + FN), per rule and overall, for the dev
split, the holdout split and both. Findings in files of the tree that carry no label are
not counted (they are context for project-wide analysis only).

Exit status: 0 the table was printed (whatever the figures), 2 usage error, missing
snapshots, an I/O error, or memlint itself failing (its exit status 2 or unreadable output).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from materialize import (  # noqa: E402
    DEFAULT_MANIFEST,
    CorpusError,
    materialize,
    out_dir_name,
    read_manifest,
)

RULES = [f"MEM{n:03d}" for n in range(1, 13)]
SPLITS = ("dev", "holdout", "all")


def splits_of(rows: list[dict]) -> list[str]:
    """The manifest's splits in a stable order (dev, holdout, then the fresh samples
    `fresh-1`, `fresh-2`... by name), and `all`."""
    named = {r["split"] for r in rows}
    return ["dev", "holdout"] + sorted(named - {"dev", "holdout"}, key=lambda s: (len(s), s)) + ["all"]


def run_memlint(binary: Path, tree: Path, files: list[str]) -> list[dict]:
    """Run memlint on each repository of the tree from its own folder, as a user of that
    repository would (its root is where its absolute imports resolve); the labelled files
    are also named on the command line, so that no ignore file or default exclusion can
    hide them (findings are de-duplicated). Filenames come back relative to the tree."""
    findings: list[dict] = []
    by_repo: dict[str, list[str]] = {}
    for f in files:
        repo_dir, _, rest = f.partition("/")
        by_repo.setdefault(repo_dir, []).append(rest)
    for repo_dir, labelled in sorted(by_repo.items()):
        for finding in run_memlint_in(binary, tree / repo_dir, labelled):
            finding = dict(finding)
            finding["filename"] = f"{repo_dir}/{Path(finding.get('filename', '')).as_posix()}"
            findings.append(finding)
    return findings


def run_memlint_in(binary: Path, tree: Path, files: list[str]) -> list[dict]:
    cmd = [str(binary), "check", "--output-format", "json", "--no-cache", "--isolated", ".", *files]
    try:
        proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    except OSError as e:
        raise CorpusError(f"cannot run {binary}: {e.strerror}") from e
    if proc.returncode not in (0, 1):
        raise CorpusError(
            f"`{' '.join(cmd)}` in {tree} exited with {proc.returncode}:\n{proc.stderr.strip()}"
        )
    try:
        findings = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise CorpusError(f"memlint printed output that is not JSON ({e}): {proc.stdout[:200]!r}") from e
    if not isinstance(findings, list):
        raise CorpusError("memlint's JSON output is not a list of findings")
    return findings


def file_key(filename: str, repo_dirs: dict[str, str]) -> tuple[str, str] | None:
    """Map a finding's filename (relative to the tree) to (repo, path)."""
    parts = Path(filename).as_posix().split("/")
    parts = [p for p in parts if p not in ("", ".")]
    if len(parts) < 2 or parts[0] not in repo_dirs:
        return None
    return repo_dirs[parts[0]], "/".join(parts[1:])


def evaluate(rows: list[dict], findings: list[dict]) -> tuple[dict, list[tuple]]:
    labels: dict[tuple, dict] = {}
    file_split: dict[tuple[str, str], str] = {}
    for row in rows:
        labels[(row["repo"], row["path"], int(row["line"]), row["rule"])] = row
        file_split[(row["repo"], row["path"])] = row["split"]
    repo_dirs = {out_dir_name(r["repo"]): r["repo"] for r in rows}

    reported: set[tuple] = set()
    for f in findings:
        key = file_key(f.get("filename", ""), repo_dirs)
        if key is None or key not in file_split:
            continue
        # In a notebook, rows count within the finding's cell, and so do its labels (the
        # cell is named in the label's reason).
        row = (f.get("location") or {}).get("row")
        if not isinstance(row, int):
            continue
        reported.add((key[0], key[1], row, f.get("code")))

    # counts[split][rule] = dict(labels, pos, neg, tp, fp, fn, unlabelled)
    counts = {s: defaultdict(lambda: defaultdict(int)) for s in splits_of(rows)}

    def bump(split: str, rule: str, field: str) -> None:
        for s in (split, "all"):
            counts[s][rule][field] += 1
            counts[s]["ALL"][field] += 1

    for key, row in labels.items():
        rule, split = row["rule"], row["split"]
        bump(split, rule, "labels")
        bump(split, rule, "pos" if row["verdict"] == "positive" else "neg")
        hit = key in reported
        if row["verdict"] == "positive":
            bump(split, rule, "tp" if hit else "fn")
        elif hit:
            bump(split, rule, "fp")
    unlabelled = sorted(k for k in reported if k not in labels)
    for repo, path, line, rule in unlabelled:
        split = file_split[(repo, path)]
        bump(split, rule, "fp")
        bump(split, rule, "unlabelled")
    return counts, unlabelled


def ratio(num: int, den: int) -> str:
    return f"{num / den:.3f}" if den else "  -  "


def print_table(title: str, table: dict) -> None:
    print(f"\n{title}")
    header = f"{'rule':<7} {'labels':>6} {'pos':>4} {'neg':>4} {'TP':>4} {'FP':>4} {'FN':>4} {'unlab':>5} {'precision':>9} {'recall':>7}"
    print(header)
    print("-" * len(header))
    for rule in RULES + ["ALL"]:
        c = table.get(rule)
        if not c:
            continue
        tp, fp, fn = c["tp"], c["fp"], c["fn"]
        print(
            f"{rule:<7} {c['labels']:>6} {c['pos']:>4} {c['neg']:>4} {tp:>4} {fp:>4} {fn:>4} "
            f"{c['unlabelled']:>5} {ratio(tp, tp + fp):>9} {ratio(tp, tp + fn):>7}"
        )


def as_json(counts: dict) -> dict:
    out = {}
    for split, table in counts.items():
        out[split] = {}
        for rule, c in table.items():
            tp, fp, fn = c["tp"], c["fp"], c["fn"]
            out[split][rule] = dict(
                c,
                precision=(tp / (tp + fp)) if tp + fp else None,
                recall=(tp / (tp + fn)) if tp + fn else None,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("memlint", type=Path, help="the memlint binary to measure (e.g. target/release/memlint)")
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST, help="default: %(default)s")
    ap.add_argument("--tree", type=Path, help="an already materialized corpus (default: materialize into a temporary folder)")
    ap.add_argument(
        "--mirror",
        type=Path,
        default=None,
        help="folder of fetched snapshots (default: $MEMLINT_CORPUS_MIRROR or /work/.mirror)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures and unlabelled findings to this JSON file")
    ap.add_argument(
        "--only",
        metavar="SPLIT",
        help="print only this split's table: dev, holdout, a fresh sample (fresh-1, ...) or all (e.g. `dev` while tuning, so that the holdout stays unseen)",
    )
    args = ap.parse_args(argv)
    if not args.memlint.is_file():
        print(f"error: {args.memlint}: no such memlint binary", file=sys.stderr)
        return 2
    binary = args.memlint.resolve()
    try:
        rows = read_manifest(args.manifest)
        with tempfile.TemporaryDirectory(prefix="memlint-corpus-") as tmp:
            tree = args.tree
            if tree is None:
                mirror = args.mirror or Path(os.environ.get("MEMLINT_CORPUS_MIRROR", "/work/.mirror"))
                tree = Path(tmp)
                status = materialize(rows, mirror, tree, labelled_only=False)
                if status != 0:
                    return status
            elif not tree.is_dir():
                print(f"error: {tree}: not a folder", file=sys.stderr)
                return 2
            labelled = sorted({f"{out_dir_name(r['repo'])}/{r['path']}" for r in rows})
            absent = [f for f in labelled if not (tree / f).is_file()]
            if absent:
                raise CorpusError(f"{tree} lacks {len(absent)} labelled files, e.g. {absent[0]}: materialize it again")
            findings = run_memlint(binary, tree, labelled)
        counts, unlabelled = evaluate(rows, findings)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2

    files = {(r["repo"], r["path"]) for r in rows}
    repos = {r["repo"] for r in rows}
    print(f"corpus: {len(rows)} labels in {len(files)} files of {len(repos)} repositories; memlint: {binary}")
    if args.only is not None and args.only not in counts:
        print(f"error: no split {args.only!r} in {args.manifest} (it has {', '.join(counts)})", file=sys.stderr)
        return 2
    for split in counts:
        if args.only in (None, split):
            print_table(f"== {split} ==", counts[split])
    file_split = {(r["repo"], r["path"]): r["split"] for r in rows}
    shown = [u for u in unlabelled if args.only in (None, "all", file_split[(u[0], u[1])])]
    print(f"\nunlabelled findings in labelled files ({len(shown)}; each counts as a false positive):")
    for repo, path, line, rule in shown:
        print(f"  {repo} {path}:{line} {rule}")
    if args.json:
        try:
            args.json.write_text(
                json.dumps(
                    {
                        "figures": {k: v for k, v in as_json(counts).items() if args.only in (None, k)},
                        "unlabelled": [list(u) for u in shown],
                    },
                    indent=2,
                )
                + "\n"
            )
        except OSError as e:
            print(f"error: {args.json}: cannot write: {e.strerror}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
