//! Snapshot tests of every rule on its fixture (`tests/fixtures/<rule-name>.py`): the
//! diagnostics, each fix's diff, and the whole file fixed. The harness also re-parses the
//! fixed file (a fix must never break syntax) and re-lints it (a fixed finding must not
//! come back).

use std::path::PathBuf;

use memlint_linter::fix::apply_edits;
use memlint_linter::{apply_fixes, lint, FixMode, LineIndex, LinterSettings, Rule, RuleSelection};

fn fixture_path(rule: Rule) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(format!("{}.py", rule.name()))
}

fn diff(before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after).unified_diff().context_radius(1).to_string()
}

fn only(rule: Rule) -> LinterSettings {
    let mut rules = RuleSelection::none();
    rules.enable(rule);
    LinterSettings { rules, ..Default::default() }
}

/// Renders what `rule` reports on its fixture, and checks what its fixes do.
///
/// A rule that checks suppression comments (`unused-noqa`) judges them by the other
/// rules' findings, so it runs with every rule enabled; its fixture must then have no
/// finding of another rule that is not suppressed (so that the fixes are its own).
fn render_rule(rule: Rule) -> String {
    let path = fixture_path(rule);
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let settings = if rule.observes_suppressions() { LinterSettings::default() } else { only(rule) };
    let result = lint(&source, &settings);
    assert!(result.syntax_errors.is_empty(), "fixture {} must parse", path.display());
    let others: Vec<_> = result.diagnostics.iter().filter(|d| d.rule != rule).collect();
    assert!(others.is_empty(), "fixture {} has findings of other rules: {others:#?}", path.display());
    let index = LineIndex::new(&source);
    let mut out = String::new();
    for d in &result.diagnostics {
        let start = index.position(d.range.start, &source);
        let end = index.position(d.range.end, &source);
        out.push_str(&format!(
            "{}:{}-{}:{} {} [{}] {}\n",
            start.row, start.column, end.row, end.column, d.rule.code(), d.severity.as_str(), d.message
        ));
        if let Some(help) = &d.help {
            out.push_str(&format!("  help: {help}\n"));
        }
        if let Some(fix) = &d.fix {
            out.push_str(&format!("  fix ({:?}): {}\n", fix.applicability, fix.message));
            let fixed = apply_edits(&source, fix);
            for line in diff(&source, &fixed).lines().skip(2) {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }

    // The whole file fixed (safe and unsafe fixes): it parses, and what was fixed is gone.
    let outcome = apply_fixes(&source, &settings, FixMode::Unsafe);
    let reparsed = lint(&outcome.source, &settings);
    assert!(
        reparsed.syntax_errors.is_empty(),
        "fixing {} introduced syntax errors: {:?}\n{}",
        rule.name(),
        reparsed.syntax_errors,
        outcome.source
    );
    assert!(outcome.rejected.is_empty(), "fixes rejected: {:?}", outcome.rejected);
    let fixable_before = result.diagnostics.iter().filter(|d| d.fix.is_some()).count();
    assert_eq!(outcome.fixed_count(), fixable_before, "every fixable finding of {} is fixed", rule.name());
    let unfixable_before = result.diagnostics.len() - fixable_before;
    // A fix may also settle a finding that had none (decorating a function guards every
    // line in it), so at most the unfixable ones remain, and nothing fixable.
    assert!(
        reparsed.diagnostics.len() <= unfixable_before && reparsed.diagnostics.iter().all(|d| d.fix.is_none()),
        "re-linting the fixed {} reports only what had no fix:\n{:#?}",
        rule.name(),
        reparsed.diagnostics
    );
    out.push_str(&format!("\n--- fixed ({} findings fixed) ---\n", outcome.fixed_count()));
    out.push_str(&diff(&source, &outcome.source));
    out
}

#[test]
fn every_rule_has_a_fixture() {
    for rule in Rule::ALL {
        assert!(fixture_path(*rule).is_file(), "missing fixture {}", fixture_path(*rule).display());
    }
}

macro_rules! rule_snapshot {
    ($test:ident, $rule:expr) => {
        #[test]
        fn $test() {
            insta::with_settings!({ snapshot_path => "snapshots", prepend_module_to_snapshot => false }, {
                insta::assert_snapshot!(stringify!($test), render_rule($rule));
            });
        }
    };
}

rule_snapshot!(eval_without_no_grad, Rule::EvalWithoutNoGrad);
rule_snapshot!(accumulated_loss_tensor, Rule::AccumulatedLossTensor);
rule_snapshot!(half_without_grad_scaler, Rule::HalfWithoutGradScaler);
rule_snapshot!(empty_cache_in_loop, Rule::EmptyCacheInLoop);
rule_snapshot!(retain_graph_in_loop, Rule::RetainGraphInLoop);
rule_snapshot!(gpu_tensors_collected, Rule::GpuTensorsCollected);
rule_snapshot!(data_parallel, Rule::DataParallel);
rule_snapshot!(torch_load_without_map_location, Rule::TorchLoadWithoutMapLocation);
rule_snapshot!(zero_grad_keeps_memory, Rule::ZeroGradKeepsMemory);
rule_snapshot!(deprecated_cuda_amp, Rule::DeprecatedCudaAmp);
rule_snapshot!(accumulation_without_loss_division, Rule::AccumulationWithoutLossDivision);
rule_snapshot!(frozen_network_tracks_grad, Rule::FrozenNetworkTracksGrad);
rule_snapshot!(unused_noqa, Rule::UnusedNoqa);

/// Every rule must have a snapshot test above: a rule added without one fails here.
#[test]
fn every_rule_has_a_snapshot_test() {
    let this_file = include_str!("rules.rs");
    for rule in Rule::ALL {
        let variant = format!("{:?}", rule);
        assert!(this_file.contains(&format!("Rule::{variant})")), "no rule_snapshot! for {variant}");
    }
}

#[test]
fn fixture_whole_file_has_no_other_rule_crashes() {
    // All rules together on every fixture: nothing panics, everything sorted.
    for rule in Rule::ALL {
        let source = std::fs::read_to_string(fixture_path(*rule)).unwrap();
        let result = lint(&source, &LinterSettings::default());
        let starts: Vec<usize> = result.diagnostics.iter().map(|d| d.range.start).collect();
        let mut sorted = starts.clone();
        sorted.sort();
        assert_eq!(starts, sorted);
    }
}
