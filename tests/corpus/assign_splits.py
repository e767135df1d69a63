#!/usr/bin/env python3
"""Assign the dev/holdout split of the corpus manifest, whole files at a time.

The files of the manifest (repo, path) are shuffled with a fixed seed; files are then taken
in that order into the holdout split while doing so brings the holdout share of the labels
closer to the target (a quarter by default). Every other file is dev. The manifest is
rewritten in place (rows keep their order), so re-running it is a no-op unless files or
labels were added. `--check` only reports whether the manifest's split column already
matches, and exits 1 when it does not.

Exit status: 0 done (or --check passed), 1 --check failed, 2 usage or I/O error.
"""
from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from materialize import COLUMNS, FRESH_SPLIT, CorpusError, DEFAULT_MANIFEST, read_manifest  # noqa: E402

DEFAULT_SEED = 18
DEFAULT_SHARE = 0.25


def compute_splits(rows: list[dict], seed: int, share: float) -> dict[tuple[str, str], str]:
    """The dev/holdout split of the rows that are not a fresh sample (those keep their
    `fresh-N`: a fresh sample is a measurement of one build on code judged before tuning)."""
    rows = [r for r in rows if not FRESH_SPLIT.fullmatch(r["split"])]
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (row["repo"], row["path"])
        counts[key] = counts.get(key, 0) + 1
    files = sorted(counts)
    random.Random(seed).shuffle(files)
    target = share * len(rows)
    held = 0
    split = {}
    for key in files:
        if abs(held + counts[key] - target) < abs(held - target):
            split[key] = "holdout"
            held += counts[key]
        else:
            split[key] = "dev"
    return split


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST, help="default: %(default)s")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="default: %(default)s")
    ap.add_argument("--share", type=float, default=DEFAULT_SHARE, help="holdout share of the labels (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the split column differs")
    args = ap.parse_args(argv)
    if not 0.0 < args.share < 1.0:
        print(f"error: --share must be between 0 and 1, got {args.share}", file=sys.stderr)
        return 2
    try:
        rows = read_manifest(args.manifest)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    split = compute_splits(rows, args.seed, args.share)
    changed = 0
    for row in rows:
        if FRESH_SPLIT.fullmatch(row["split"]):
            continue
        want = split[(row["repo"], row["path"])]
        if row["split"] != want:
            changed += 1
            row["split"] = want
    seeded = [r for r in rows if not FRESH_SPLIT.fullmatch(r["split"])]
    held = sum(1 for r in seeded if r["split"] == "holdout")
    files_held = sum(1 for v in split.values() if v == "holdout")
    summary = (
        f"{held} of {len(seeded)} labels ({held / len(seeded):.1%}) in {files_held} of {len(split)} files are holdout"
    )
    if args.check:
        if changed:
            print(f"error: {changed} rows of {args.manifest} have a split that differs from seed {args.seed}", file=sys.stderr)
            return 1
        print(f"ok: {summary}")
        return 0
    try:
        with args.manifest.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    except OSError as e:
        print(f"error: {args.manifest}: cannot write: {e.strerror}", file=sys.stderr)
        return 2
    print(f"{summary}; {changed} rows changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
