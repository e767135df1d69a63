//! memlint never panics on any input: arbitrary bytes, and fixtures with random damage.

use memlint_linter::{apply_fixes, lint, lint_unfiltered, FixMode, LinterSettings};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngSeed};

/// Fixed seed and many cases: a failure reproduces on every run (and on CI), and is
/// saved under `proptest-regressions/` to be committed as a regression case.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(0x6d656d6c696e74),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}

const FIXTURES: &[&str] = &[
    include_str!("fixtures/eval-without-no-grad.py"),
    include_str!("fixtures/accumulated-loss-tensor.py"),
    include_str!("fixtures/half-without-grad-scaler.py"),
    include_str!("fixtures/empty-cache-in-loop.py"),
    include_str!("fixtures/retain-graph-in-loop.py"),
    include_str!("fixtures/gpu-tensors-collected.py"),
    include_str!("fixtures/data-parallel.py"),
    include_str!("fixtures/torch-load-without-map-location.py"),
    include_str!("fixtures/zero-grad-keeps-memory.py"),
    include_str!("fixtures/deprecated-cuda-amp.py"),
    include_str!("fixtures/accumulation-without-loss-division.py"),
    include_str!("fixtures/frozen-network-tracks-grad.py"),
];

/// Lints and fixes `source`; the properties are "returns" and "fixing never adds
/// syntax errors".
fn exercise(source: &str) {
    let settings = LinterSettings::default();
    let result = lint(source, &settings);
    for d in &result.diagnostics {
        assert!(d.range.start <= d.range.end && d.range.end <= source.len());
        assert!(source.is_char_boundary(d.range.start) && source.is_char_boundary(d.range.end));
    }
    let outcome = apply_fixes(source, &settings, FixMode::Unsafe);
    let after = lint(&outcome.source, &settings);
    assert!(after.syntax_errors.len() <= result.syntax_errors.len(), "a fix added a syntax error");
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        exercise(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn python_looking_noise(tokens in proptest::collection::vec(
        prop_oneof![
            Just("for x in val_loader:\n"), Just("    "), Just("\t"), Just("model(x)"), Just("\n"),
            Just("with torch.no_grad()"), Just(":"), Just("total += loss"), Just("loss.backward()"),
            Just("import torch\n"), Just("torch.cuda.empty_cache()"), Just("def evaluate("), Just(")"),
            Just("("), Just("# noqa: MEM001"), Just("model.half()"), Just("'''"), Just("\""), Just("é😀"),
            Just("@torch.no_grad"), Just("class M(nn.Module):\n"), Just("\r\n"), Just("\\\n"),
        ],
        0..200,
    )) {
        exercise(&tokens.concat());
    }

    /// The pre-filter only skips work: with and without it, the findings are the same.
    #[test]
    fn prefilter_is_sound(which in 0..FIXTURES.len(), cuts in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..400), 0..4)) {
        let mut source = FIXTURES[which].to_owned();
        for (at, len) in cuts {
            let mut start = at.index(source.len().max(1)).min(source.len());
            while !source.is_char_boundary(start) { start -= 1; }
            let mut end = (start + len).min(source.len());
            while !source.is_char_boundary(end) { end -= 1; }
            source.replace_range(start..end, "");
        }
        let settings = LinterSettings::default();
        prop_assert_eq!(lint(&source, &settings).diagnostics, lint_unfiltered(&source, &settings).diagnostics);
    }

    /// Loop headers, strings, comments and brackets in any order: the word scan that
    /// finds loop headers must never lose one.
    #[test]
    fn prefilter_is_sound_on_noise(tokens in proptest::collection::vec(
        prop_oneof![
            Just("for "), Just("while "), Just(" in "), Just("x"), Just("val_loader"), Just("range(n)"),
            Just(":"), Just(":="), Just("\n"), Just("    "), Just("("), Just(")"), Just("["), Just("]"),
            Just("{"), Just("}"), Just("'"), Just("\""), Just("'''"), Just("# a: (\n"), Just("\\\n"),
            Just("f\"{d[\"k:v\"]}\""), Just("out = model(x)\n"), Just("preds.append(out)\n"),
            Just("total += criterion(out, y)\n"), Just("loss.backward()\n"), Just("optimizer.step()\n"),
            Just("model.eval()\n"), Just("def evaluate(model):\n"), Just("import torch\n"),
        ],
        0..120,
    )) {
        let source = tokens.concat();
        let settings = LinterSettings::default();
        prop_assert_eq!(lint(&source, &settings).diagnostics, lint_unfiltered(&source, &settings).diagnostics);
    }

    #[test]
    fn damaged_fixtures(which in 0..FIXTURES.len(), cuts in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..40, "[ -~\n\t:()]{0,8}"), 1..6)) {
        let mut source = FIXTURES[which].to_owned();
        for (at, len, insert) in cuts {
            let mut start = at.index(source.len().max(1)).min(source.len());
            while !source.is_char_boundary(start) { start -= 1; }
            let mut end = (start + len).min(source.len());
            while !source.is_char_boundary(end) { end -= 1; }
            source.replace_range(start..end, &insert);
        }
        exercise(&source);
    }
}

/// Every fixture and bundled example reports the same with and without the pre-filter.
#[test]
fn prefilter_keeps_every_fixture_finding() {
    let examples = [
        include_str!("../../../tests/examples/train_classifier.py"),
        include_str!("../../../tests/examples/generate_text.py"),
        include_str!("../../../tests/examples/clean_training.py"),
    ];
    let settings = LinterSettings::default();
    for source in FIXTURES.iter().chain(examples.iter()) {
        let filtered = lint(source, &settings).diagnostics;
        assert_eq!(filtered, lint_unfiltered(source, &settings).diagnostics);
    }
}

/// Skipping function bodies must not change a finding in any file that parses: remove each
/// top-level statement and each method of every fixture and bundled example in turn (the
/// variants that still parse cleanly), and compare with a whole parse.

/// A stray `:` before a `def` made the old outline scan take it for a header's colon
/// and slice backwards (`memlint check` exited 101). Found on a real session's file.
#[test]
fn stray_colon_before_def() {
    let source = "import torch\n\ndef f(loader):\n    for x in loader:\n        loss.backward()\n\n:def g(x):\n    return x\n";
    exercise(source);
    let settings = LinterSettings::default();
    assert_eq!(lint(source, &settings).diagnostics, lint_unfiltered(source, &settings).diagnostics);
}

/// Whether a method trains asked whether `self.scheduler.step()` steps an optimizer, which
/// asked what `self.scheduler` is: the result of a method call, so whether that method
/// runs a forward pass, so whether it trains (the same question, re-entered: a panic in
/// DeepSpeed's engine.py on the benchmark tree).
#[test]
fn whether_a_method_trains_may_ask_itself_again() {
    let source = "from torch.nn.modules import Module\n\n\nclass Engine(Module):\n    def __init__(self):\n        self.warm_up()\n        self.scheduler = self.build_scheduler()\n\n    def warm_up(self):\n        pass\n\n    def build_scheduler(self):\n        self.scheduler.step()\n";
    exercise(source);
}

/// Two local functions that return each other's context: asking whether `with a():`
/// disables gradients must end.
#[test]
fn context_factories_returning_each_other_end() {
    let source = "import torch\nimport torch.nn as nn\n\ndef a():\n    return b()\n\ndef b():\n    return a()\n\nnet = nn.Linear(2, 2)\nwith a():\n    print(net(torch.randn(1, 2)).argmax())\n";
    let result = memlint_linter::lint(source, &memlint_linter::LinterSettings::default());
    assert!(result.diagnostics.iter().any(|d| d.rule.code() == "MEM001"), "{:?}", result.diagnostics);
}
