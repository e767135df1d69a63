//! One engine, the same findings whatever way it is asked: with and without the
//! pre-filter, with each rule selected alone, over every fixture and bundled example
//! (fixes included: a `Diagnostic` carries its fix). The language server's side of the
//! comparison is `crates/memlint_server/tests/engine.rs`; `scripts/compare-engine.sh`
//! does all three on a real tree.

use memlint_linter::{lint, lint_unfiltered, LinterSettings, Rule, RuleSelection};

/// Every fixture and bundled example, with its name.
fn corpus() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for dir in [concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"), concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/examples")] {
        let mut stack = vec![std::path::PathBuf::from(dir)];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            } else if path.extension().is_some_and(|e| e == "py") {
                files.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    files.sort();
    assert!(files.len() >= 15, "fixtures and examples not found: {files:?}");
    files
}

#[test]
fn the_prefilter_changes_no_finding() {
    let settings = LinterSettings::default();
    for (name, source) in corpus() {
        assert_eq!(lint(&source, &settings).diagnostics, lint_unfiltered(&source, &settings).diagnostics, "{name}");
    }
}

#[test]
fn each_rule_alone_finds_what_it_finds_among_all() {
    let all = LinterSettings::default();
    let mut compared = 0;
    for (name, source) in corpus() {
        let everything = lint(&source, &all).diagnostics;
        for rule in Rule::ALL {
            let alone = LinterSettings { rules: RuleSelection::from_select_ignore(&[*rule], &[]), ..LinterSettings::default() };
            let expected: Vec<_> = everything.iter().filter(|d| d.rule == *rule).cloned().collect();
            compared += expected.len();
            assert_eq!(lint(&source, &alone).diagnostics, expected, "{name}, {} alone", rule.code());
        }
    }
    assert!(compared > 50, "only {compared} findings compared");
}

/// A trigger is a necessary condition: on each file where a rule reports something,
/// its trigger holds.
#[test]
fn every_finding_is_in_a_file_its_rule_triggers_on() {
    for (name, source) in corpus() {
        let words = memlint_linter::prefilter::Words::scan(&source);
        for d in lint_unfiltered(&source, &LinterSettings::default()).diagnostics {
            assert!(d.rule.trigger(&words), "{name}: {} reports but its trigger does not hold", d.rule.code());
        }
    }
}

/// `evaluate` is only called under `no_grad` imported under another name: nothing to
/// report, whether the file goes through the pre-filter or not (the removed word-level
/// copy of the "only called without gradients" fixed point did not know aliases, so
/// `memlint check` reported MEM001 here while the server did not).
#[test]
fn a_function_only_called_under_an_aliased_no_grad_is_not_reported() {
    let source = "import torch\nfrom torch import no_grad as ng\n\n\ndef evaluate(model, loader):\n    correct = 0\n    for x, y in loader:\n        out = model(x)\n        correct += (out.argmax(1) == y).sum().item()\n    return correct\n\n\ndef main(model, val_loader):\n    model.eval()\n    with ng():\n        print(evaluate(model, val_loader))\n";
    let settings = LinterSettings::default();
    assert_eq!(lint(source, &settings).diagnostics, Vec::new());
    assert_eq!(lint_unfiltered(source, &settings).diagnostics, Vec::new());
}
