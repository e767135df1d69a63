#!/usr/bin/env bash
# Tests of the labelled corpus of issue 18 (tests/corpus): the manifest's invariants and the
# materialize / assign_splits / evaluate scripts, on small git repositories made by the tests.
# Needs only python3 and git, plus a memlint binary ($MEMLINT_BIN, which scripts/test-all.sh
# exports, else target/debug/memlint, else target/release/memlint).
# It does not measure memlint on the corpus itself: that needs the fetched snapshots
# (see tests/corpus/README.md, "Measuring").
set -euo pipefail
cd "$(dirname "$0")"
python3 -m unittest discover -s . -p 'test_*.py' -v
