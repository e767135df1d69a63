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
    for (name, source) in corpus().into_iter().chain(units()) {
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
            if rule.observes_suppressions() {
                // `unused-noqa` judges directives by the other enabled rules' findings:
                // alone, every other rule is not enabled (its own tests below).
                continue;
            }
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
///
/// Also on each fixture case cut out of its fixture ([`units`]): a trigger must hold on the
/// words of the file it reports in, not borrow them from a neighbouring case.
#[test]
fn every_finding_is_in_a_file_its_rule_triggers_on() {
    let mut in_units = 0;
    for (name, source) in corpus().into_iter().chain(units()) {
        let words = memlint_linter::prefilter::Words::scan(&source);
        let findings = lint_unfiltered(&source, &LinterSettings::default()).diagnostics;
        for d in &findings {
            assert!(d.rule.trigger(&words), "{name}: {} reports but its trigger does not hold:\n{source}", d.rule.code());
        }
        if name.contains(".py:") {
            in_units += findings.len();
        }
    }
    assert!(in_units > 100, "only {in_units} findings in the cut-out cases");
}

/// Each fixture and example cut into small files: its module-level statements (imports,
/// globals) with one top-level definition at a time. A trigger must hold on the words of
/// the file it reports in, not borrow them from a neighbouring case of the same fixture.
fn units() -> Vec<(String, String)> {
    let mut units = Vec::new();
    for (name, source) in corpus() {
        let tree = memlint_python::parse_with(&source, None);
        let root = tree.root_node();
        let mut cursor = root.walk();
        let children: Vec<_> = root.named_children(&mut cursor).collect();
        let is_definition = |kind: &str| matches!(kind, "function_definition" | "class_definition" | "decorated_definition");
        let prelude: String = children.iter().filter(|c| !is_definition(c.kind())).map(|c| format!("{}\n", &source[c.byte_range()])).collect();
        for definition in children.iter().filter(|c| is_definition(c.kind())) {
            let line = definition.start_position().row + 1;
            units.push((format!("{name}:{line}"), format!("{prelude}\n\n{}\n", &source[definition.byte_range()])));
        }
    }
    units
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

fn messages(source: &str, settings: &LinterSettings) -> Vec<String> {
    let filtered = lint(source, settings).diagnostics;
    assert_eq!(filtered, lint_unfiltered(source, settings).diagnostics, "pre-filter changed findings of {source:?}");
    filtered.iter().map(|d| format!("{} {}", d.rule.code(), d.message)).collect()
}

/// The suppression hook: MEM013 sees which directive suppressed what, which rules the
/// settings enable (not which the pre-filter kept), and exempts directives listing it.
#[test]
fn unused_noqa_judges_directives_by_what_was_enabled_and_suppressed() {
    let all = LinterSettings::default();
    let alone = LinterSettings { rules: RuleSelection::from_select_ignore(&[Rule::UnusedNoqa], &[]), ..LinterSettings::default() };
    // Enabled, but its trigger does not hold (no `empty_cache`): it ran and found nothing.
    assert_eq!(messages("x = 1  # noqa: MEM004\n", &all), ["MEM013 Unused `noqa` directive (unused: `MEM004`)"]);
    // Not enabled: ruff's "non-enabled".
    assert_eq!(messages("x = 1  # noqa: MEM004\n", &alone), ["MEM013 Unused `noqa` directive (non-enabled: `MEM004`)"]);
    // Used: a finding was suppressed by it.
    let used = "import torch\ndef f():\n    return torch.load('a.pt')  # noqa: MEM008\n";
    assert_eq!(messages(used, &all), Vec::<String>::new());
    assert_eq!(messages(used, &alone), ["MEM013 Unused `noqa` directive (non-enabled: `MEM008`)"]);
    // Exempt: a directive on the line lists MEM013; a blanket `# noqa` does not exempt.
    assert_eq!(messages("x = 1  # noqa: MEM004, MEM013\n", &all), Vec::<String>::new());
    assert_eq!(
        messages("x = 1  # noqa  # memlint: ignore[MEM004]\n", &all),
        ["MEM013 Unused `memlint: ignore` directive (unused: `MEM004`)"]
    );
    // Other tools' codes and a bare `# noqa` are never reported; MEM013 disabled reports nothing.
    assert_eq!(messages("x = 1  # noqa: E501, F401\ny = 2  # noqa\n", &all), Vec::<String>::new());
    let without = LinterSettings { rules: RuleSelection::from_select_ignore(&[], &[Rule::UnusedNoqa]), ..LinterSettings::default() };
    assert_eq!(messages("x = 1  # noqa: MEM1\n", &without), Vec::<String>::new());
    // In code a syntax error mangled, no finding.
    assert_eq!(messages("def f(:\n    x = 1  # noqa: MEM004\n", &all), Vec::<String>::new());
}

/// With `--fix`, unused codes go and what is used stays; fixing again changes nothing.
#[test]
fn fixing_unused_noqa_keeps_what_suppresses() {
    use memlint_linter::{apply_fixes, FixMode};
    let source = "import torch\ndef f():\n    return torch.load('a.pt')  # noqa: MEM008, MEM1, E501\nx = 1  # noqa: MEM004\n";
    let outcome = apply_fixes(source, &LinterSettings::default(), FixMode::Safe);
    assert_eq!(outcome.source, "import torch\ndef f():\n    return torch.load('a.pt')  # noqa: MEM008, E501\nx = 1\n");
    assert!(outcome.remaining.is_empty(), "{:?}", outcome.remaining);
    assert_eq!(apply_fixes(&outcome.source, &LinterSettings::default(), FixMode::Safe).source, outcome.source);
}
