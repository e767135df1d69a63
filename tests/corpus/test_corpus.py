"""Tests of the labelled corpus (manifest.csv) and of its scripts.

Run by tests/corpus/run.sh (and so by scripts/test-all.sh). They need no snapshot of the
corpus repositories: the scripts are exercised on small git repositories made here, and
evaluate.py runs the real memlint binary ($MEMLINT_BIN, else target/debug/memlint, else
target/release/memlint).
"""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import assign_splits  # noqa: E402
import evaluate  # noqa: E402
import materialize  # noqa: E402

# The list of repositories kept for independent evaluation lives outside this repository
# (beside it on the project's machines, never in a user's clone); name it to check it.
RESERVED = Path(os.environ["MEMLINT_RESERVED_REPOS"]) if os.environ.get("MEMLINT_RESERVED_REPOS") else None
RULES = {f"MEM{n:03d}" for n in range(1, 13)}


def memlint_binary() -> Path | None:
    env = os.environ.get("MEMLINT_BIN")
    if env:
        return Path(env)
    for profile in ("debug", "release"):
        candidate = ROOT / "target" / profile / "memlint"
        if candidate.is_file():
            return candidate
    return None


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_snapshot(mirror: Path, repo: str, files: dict[str, str], bare: bool = False) -> str:
    """A fetched-snapshot look-alike: <mirror>/<owner>+<name>/repo[/.git]; returns HEAD."""
    work = mirror / repo.replace("/", "+") / ("work" if bare else "repo")
    work.mkdir(parents=True)
    git("init", "-q", cwd=work)
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-qm", "snapshot", cwd=work)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True).stdout.strip()
    if bare:
        git("clone", "-q", "--bare", str(work), str(work.parent / "repo"), cwd=work.parent)
    return head


def write_manifest(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=materialize.COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def run_main(func, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = func(argv)
    return status, out.getvalue(), err.getvalue()


class ManifestTest(unittest.TestCase):
    """The committed manifest meets the protocol of README.md."""

    @classmethod
    def setUpClass(cls):
        cls.rows = materialize.read_manifest(materialize.DEFAULT_MANIFEST)

    def test_size_and_spread(self):
        repos = {r["repo"] for r in self.rows}
        self.assertGreaterEqual(len(self.rows), 400)
        self.assertGreaterEqual(len(repos), 25)
        mem001 = [r for r in self.rows if r["rule"] == "MEM001"]
        self.assertGreaterEqual(len(mem001), 120)
        positives = sum(r["verdict"] == "positive" for r in self.rows)
        self.assertGreater(positives / len(self.rows), 0.5)

    def test_fields(self):
        seen = set()
        for r in self.rows:
            self.assertIn(r["rule"], RULES, r)
            self.assertNotIn("\n", r["reason"], r)
            self.assertFalse(r["path"].startswith("/") or ".." in r["path"].split("/"), r)
            key = (r["repo"], r["path"], int(r["line"]), r["rule"])
            self.assertNotIn(key, seen, f"duplicate label {key}")
            seen.add(key)

    def test_one_commit_per_repo_and_one_split_per_file(self):
        commits, splits = {}, {}
        for r in self.rows:
            self.assertEqual(commits.setdefault(r["repo"], r["commit"]), r["commit"], r["repo"])
            key = (r["repo"], r["path"])
            self.assertEqual(splits.setdefault(key, r["split"]), r["split"], key)

    def test_split_is_the_seeded_one(self):
        status, out, err = run_main(assign_splits.main, ["--check"])
        self.assertEqual(status, 0, err)
        seeded = [r for r in self.rows if r["split"] in ("dev", "holdout")]
        held = sum(r["split"] == "holdout" for r in seeded) / len(seeded)
        self.assertTrue(0.2 <= held <= 0.3, held)

    def test_no_reserved_repository(self):
        if RESERVED is None or not RESERVED.is_file():
            self.skipTest("MEMLINT_RESERVED_REPOS names no file: the reserved repositories are not checked")
        reserved = {
            line.strip().lower()
            for line in RESERVED.read_text().splitlines()
            if line.strip() and not line.startswith("#")
        }
        used = {r["repo"].lower() for r in self.rows}
        self.assertEqual(used & reserved, set())


class MaterializeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="corpus-test-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(self.tmp)])
        self.mirror = self.tmp / "mirror"
        self.head_a = make_snapshot(
            self.mirror, "acme/demo", {"train.py": "x = 1\n", "pkg/models.py": "y = 2\n", "README.md": "hi\n"}
        )
        self.head_b = make_snapshot(self.mirror, "other/bare", {"eval.py": "z = 3\n"}, bare=True)
        self.rows = [
            dict(repo="acme/demo", commit=self.head_a, path="train.py", line="1", rule="MEM001",
                 verdict="positive", reason="r", split="dev"),
            dict(repo="other/bare", commit=self.head_b, path="eval.py", line="1", rule="MEM008",
                 verdict="negative", reason="r", split="holdout"),
        ]
        self.manifest = self.tmp / "manifest.csv"
        write_manifest(self.manifest, self.rows)

    def test_writes_the_tree_from_both_layouts(self):
        out = self.tmp / "out"
        status, stdout, err = run_main(
            materialize.main, [str(out), "--manifest", str(self.manifest), "--mirror", str(self.mirror)]
        )
        self.assertEqual(status, 0, err)
        self.assertEqual((out / "acme__demo" / "train.py").read_text(), "x = 1\n")
        self.assertEqual((out / "acme__demo" / "pkg" / "models.py").read_text(), "y = 2\n")
        self.assertFalse((out / "acme__demo" / "README.md").exists())
        self.assertEqual((out / "other__bare" / "eval.py").read_text(), "z = 3\n")

    def test_labelled_only(self):
        out = self.tmp / "out"
        status, _, err = run_main(
            materialize.main,
            [str(out), "--manifest", str(self.manifest), "--mirror", str(self.mirror), "--labelled-only"],
        )
        self.assertEqual(status, 0, err)
        self.assertTrue((out / "acme__demo" / "train.py").is_file())
        self.assertFalse((out / "acme__demo" / "pkg" / "models.py").exists())

    def test_missing_snapshot_is_named_and_nothing_is_written(self):
        self.rows.append(dict(self.rows[0], repo="ghost/repo", commit="0" * 40))
        write_manifest(self.manifest, self.rows)
        out = self.tmp / "out"
        status, _, err = run_main(
            materialize.main, [str(out), "--manifest", str(self.manifest), "--mirror", str(self.mirror)]
        )
        self.assertEqual(status, 2)
        self.assertIn("ghost/repo", err)
        self.assertIn("fetch", err)
        self.assertFalse(out.exists())

    def test_missing_commit_is_named(self):
        self.rows[0]["commit"] = "1" * 40
        write_manifest(self.manifest, self.rows)
        status, _, err = run_main(
            materialize.main, [str(self.tmp / "out"), "--manifest", str(self.manifest), "--mirror", str(self.mirror)]
        )
        self.assertEqual(status, 2)
        self.assertIn("lacks commit " + "1" * 40, err)

    def test_bad_manifest_names_the_file_and_row(self):
        self.manifest.write_text("repo,commit\nacme/demo,abc\n")
        status, _, err = run_main(materialize.main, [str(self.tmp / "out"), "--manifest", str(self.manifest)])
        self.assertEqual(status, 2)
        self.assertIn(str(self.manifest), err)
        self.assertIn("header", err)
        write_manifest(self.manifest, [dict(self.rows[0], verdict="maybe")])
        status, _, err = run_main(materialize.main, [str(self.tmp / "out"), "--manifest", str(self.manifest)])
        self.assertEqual(status, 2)
        self.assertIn(f"{self.manifest}:2", err)
        self.assertIn("verdict", err)


class AssignSplitsTest(unittest.TestCase):
    def test_whole_files_about_a_quarter_and_deterministic(self):
        rows = []
        for f in range(40):
            for line in range(1 + f % 5):
                rows.append(dict(repo=f"o/r{f % 7}", commit="a" * 40, path=f"f{f}.py", line=str(line + 1),
                                 rule="MEM001", verdict="positive", reason="r", split="dev"))
        first = assign_splits.compute_splits(rows, seed=18, share=0.25)
        self.assertEqual(first, assign_splits.compute_splits(rows, seed=18, share=0.25))
        held = sum(1 for r in rows if first[(r["repo"], r["path"])] == "holdout")
        self.assertLessEqual(abs(held - 0.25 * len(rows)), 5)
        self.assertNotEqual(first, assign_splits.compute_splits(rows, seed=19, share=0.25))

    def test_fresh_samples_keep_their_split(self):
        rows = [dict(repo="o/r", commit="a" * 40, path=f"f{f}.py", line="1", rule="MEM001", verdict="positive",
                     reason="r", split="dev") for f in range(8)]
        fresh = [dict(repo="o/new", commit="b" * 40, path=f"g{f}.py", line="1", rule="MEM001", verdict="positive",
                      reason="r", split="fresh-1") for f in range(30)]
        split = assign_splits.compute_splits(rows + fresh, seed=18, share=0.25)
        self.assertEqual(split, assign_splits.compute_splits(rows, seed=18, share=0.25),
                         "a fresh sample neither takes a dev/holdout split nor moves the seeded one")


SAMPLE = """\
import torch
import torch.nn as nn


def evaluate(model, loader):
    model.eval()
    for x, y in loader:
        out = model(x.cuda())
    return out


def validate(model, loader):
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            out = model(x.cuda())
    return out


def load(path):
    state = torch.load(path)
    wrapped = nn.DataParallel(nn.Linear(2, 2))
    return state, wrapped
"""


class EvaluateTest(unittest.TestCase):
    """evaluate.py against the real memlint on one labelled file.

    Labels: line 8 positive MEM001 (found: TP), line 16 negative MEM001 (not found: TN),
    line 21 negative MEM008 (found: FP), line 4 positive MEM006 (nothing there: FN);
    the DataParallel finding on line 22 is unlabelled (FP, listed).
    """

    def setUp(self):
        self.binary = memlint_binary()
        if self.binary is None or not self.binary.is_file():
            self.fail("no memlint binary: set MEMLINT_BIN or run `cargo build -p memlint` first")
        self.tmp = Path(tempfile.mkdtemp(prefix="corpus-eval-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(self.tmp)])
        self.mirror = self.tmp / "mirror"
        head = make_snapshot(self.mirror, "acme/demo", {"train.py": SAMPLE, "other.py": "import torch\ntorch.load('x')\n"})

        def row(line, rule, verdict):
            return dict(repo="acme/demo", commit=head, path="train.py", line=str(line), rule=rule,
                        verdict=verdict, reason="r", split="dev")

        self.manifest = self.tmp / "manifest.csv"
        write_manifest(
            self.manifest,
            [row(8, "MEM001", "positive"), row(16, "MEM001", "negative"), row(21, "MEM008", "negative"),
             row(4, "MEM006", "positive")],
        )

    def test_table_and_json(self):
        out_json = self.tmp / "figures.json"
        status, out, err = run_main(
            evaluate.main,
            [str(self.binary), "--manifest", str(self.manifest), "--mirror", str(self.mirror), "--json", str(out_json)],
        )
        self.assertEqual(status, 0, err)
        self.assertIn("== holdout ==", out)
        self.assertIn("acme/demo train.py:22 MEM007", out)
        self.assertNotIn("other.py", out, "findings in unlabelled files must not count")
        figures = json.loads(out_json.read_text())
        total = figures["figures"]["all"]["ALL"]
        self.assertEqual((total["tp"], total["fp"], total["fn"]), (1, 2, 1))
        self.assertEqual(total["unlabelled"], 1)
        self.assertAlmostEqual(total["precision"], 1 / 3)
        self.assertAlmostEqual(total["recall"], 1 / 2)
        mem001 = figures["figures"]["dev"]["MEM001"]
        self.assertEqual((mem001["tp"], mem001["fp"], mem001["fn"]), (1, 0, 0))
        self.assertEqual(figures["unlabelled"], [["acme/demo", "train.py", 22, "MEM007"]])

    def test_prematerialized_tree_gives_the_same_figures(self):
        tree = self.tmp / "tree"
        status, _, err = run_main(
            materialize.main, [str(tree), "--manifest", str(self.manifest), "--mirror", str(self.mirror)]
        )
        self.assertEqual(status, 0, err)
        # An ignore file in the tree must not hide a labelled file from the measurement.
        (tree / ".ignore").write_text("acme__demo/\n")
        status, out, err = run_main(
            evaluate.main, [str(self.binary), "--manifest", str(self.manifest), "--tree", str(tree)]
        )
        self.assertEqual(status, 0, err)
        self.assertRegex(out, r"\nALL\s+4\s+2\s+2\s+1\s+2\s+1\s+1\s+0\.333\s+0\.500\n")

    def test_only_one_split(self):
        status, out, err = run_main(
            evaluate.main,
            [str(self.binary), "--manifest", str(self.manifest), "--mirror", str(self.mirror), "--only", "holdout"],
        )
        self.assertEqual(status, 0, err)
        self.assertIn("== holdout ==", out)
        self.assertNotIn("== dev ==", out)
        self.assertNotIn("MEM007", out, "the unlabelled finding is in a dev file")

    def test_a_fresh_sample_is_a_split_of_its_own(self):
        rows = list(csv.DictReader(self.manifest.open()))
        for r in rows:
            if r["rule"] == "MEM001":
                r["split"] = "fresh-1"
        write_manifest(self.manifest, rows)
        status, out, err = run_main(
            evaluate.main,
            [str(self.binary), "--manifest", str(self.manifest), "--mirror", str(self.mirror), "--only", "fresh-1"],
        )
        self.assertEqual(status, 0, err)
        self.assertIn("== fresh-1 ==", out)
        self.assertRegex(out, r"\nMEM001\s+2\s+1\s+1\s+1\s+0\s+0\s+0\s+1\.000\s+1\.000\n")
        self.assertNotIn("MEM008", out, "the MEM008 label stays in dev")
        status, _, err = run_main(
            evaluate.main,
            [str(self.binary), "--manifest", str(self.manifest), "--mirror", str(self.mirror), "--only", "fresh-2"],
        )
        self.assertEqual(status, 2)
        self.assertIn("no split 'fresh-2'", err)

    def test_tree_missing_a_labelled_file(self):
        tree = self.tmp / "tree"
        (tree / "acme__demo").mkdir(parents=True)
        status, _, err = run_main(evaluate.main, [str(self.binary), "--manifest", str(self.manifest), "--tree", str(tree)])
        self.assertEqual(status, 2)
        self.assertIn("acme__demo/train.py", err)

    def test_usage_errors(self):
        status, _, err = run_main(evaluate.main, [str(self.tmp / "no-such-memlint"), "--manifest", str(self.manifest)])
        self.assertEqual(status, 2)
        self.assertIn("no such memlint binary", err)
        status, _, err = run_main(
            evaluate.main, [str(self.binary), "--manifest", str(self.manifest), "--mirror", str(self.tmp / "empty")]
        )
        self.assertEqual(status, 2)
        self.assertIn("acme/demo", err)


if __name__ == "__main__":
    unittest.main()
