#!/usr/bin/env python3
"""Which audited findings of memlint on the engine tree does a build still report?

The audit (`tree-findings.csv`, see README.md here) judged findings that memlint reported
on the tree of `scripts/fetch-engine-tree.sh` (its pinned commits), outside diffusers
(reserved for independent evaluation), in two samples. Each row is a finding read in the
code and judged a true positive, a false positive (with the pattern that fooled memlint) or
unsure.

    python3 tests/audit/rescore.py MEMLINT TREE

Runs `MEMLINT check --no-cache --output-format json TREE` and prints, per rule and verdict,
how many audited findings are still reported: a true positive that disappears is a lost
finding, a false positive that stays is one still to fix. The audit's false positives were
then used to fix rules, so their "still reported" count is not an independent measure.
"""
import collections
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    memlint, tree = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if not os.path.isfile(memlint) or not os.access(memlint, os.X_OK):
        print(f"error: {memlint}: not an executable memlint binary", file=sys.stderr)
        return 2
    if not os.path.isdir(tree):
        print(f"error: {tree}: not a folder (make it with scripts/fetch-engine-tree.sh {tree})", file=sys.stderr)
        return 2
    with open(os.path.join(HERE, "tree-findings.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    folders = {r["repo"].replace("/", "+") for r in rows}
    missing = sorted(d for d in folders if not os.path.isdir(os.path.join(tree, d)))
    if missing:
        print(f"error: {tree} lacks {', '.join(missing)} (make it with scripts/fetch-engine-tree.sh)", file=sys.stderr)
        return 2
    run = subprocess.run([memlint, "check", "--no-cache", "--exit-zero", "--output-format", "json", "."], cwd=tree, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"error: memlint exited {run.returncode}: {run.stderr.strip()[:500]}", file=sys.stderr)
        return 2
    reported = set()
    for finding in json.loads(run.stdout):
        path = os.path.relpath(os.path.join(tree, finding["filename"]), tree).replace(os.sep, "/")
        reported.add((path, finding["location"]["row"], finding["code"]))
    counts = collections.Counter()
    still = collections.Counter()
    for r in rows:
        key = (r["sample"], r["rule"], r["verdict"])
        counts[key] += 1
        path = r["repo"].replace("/", "+") + "/" + r["path"]
        if (path, int(r["line"]), r["rule"]) in reported:
            still[key] += 1
    print(f"{'sample':7} {'rule':7} {'verdict':15} {'audited':>7} {'still reported':>14}")
    for key in sorted(counts):
        print(f"{key[0]:7} {key[1]:7} {key[2]:15} {counts[key]:7} {still[key]:14}")
    tp = sum(v for (_, _, verdict), v in still.items() if verdict == "true-positive")
    fp = sum(v for (_, _, verdict), v in still.items() if verdict == "false-positive")
    lost = sum(v for (_, _, verdict), v in counts.items() if verdict == "true-positive") - tp
    print(f"true positives still reported: {tp} (lost: {lost}); false positives still reported: {fp}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
