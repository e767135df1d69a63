//! The metamorphic harness on every fixture case and bundled example (issue 32): prints
//! the per-transformation table and the overall invariance (`cargo test -p
//! memlint_metamorphic --test invariance -- --nocapture`), and fails when the invariance
//! falls below today's, when a rewrite does not parse, or when a transformation stops
//! applying where it applied.

use memlint_metamorphic::harness::{self, Report};
use memlint_metamorphic::transform::{self, Context, Transformation};
use memlint_metamorphic::{cases, Rewrite};

/// The overall invariance on the fixtures and examples, rounded down: 0.8886 when the
/// harness was written (1,955 of 2,200 rewrites), 0.988 today (2,873 of 2,907). The goal of
/// issue 32 is **0.98**; this floor holds it and stops regressions.
const MIN_INVARIANCE: f64 = 0.98;

/// Rewrites each transformation makes on today's fixtures and examples. A transformation
/// must still make at least 80% of them (fixtures change; a transformation that silently
/// stops applying must not).
const APPLIED_TODAY: &[(&str, usize)] = &[
    ("neutral-names", 326),
    ("misleading-names", 326),
    ("extract-loop-body", 201),
    ("static-method", 268),
    ("aliased-imports", 329),
    ("for-to-while", 214),
    ("enumerate", 214),
    ("zip-count", 214),
    ("dict-container", 117),
    ("list-container", 117),
    ("factory", 117),
    ("factory-module", 76),
    ("gate-variable", 69),
    ("if-true", 319),
];

fn report() -> Report {
    let cases = cases::builtin().expect("fixtures and examples");
    assert!(cases.len() >= 200, "only {} cases cut from the fixtures and examples", cases.len());
    let all: Vec<&'static Transformation> = transform::ALL.iter().collect();
    harness::run(&cases, &all, None)
}

#[test]
fn fixtures_and_examples_keep_their_findings_under_rewrites() {
    let report = report();
    println!("{}", harness::table(&report));
    println!("Most frequent causes:\n{}", harness::causes_table(&report, 20));
    assert!(report.skipped.is_empty(), "cases with syntax errors: {:?}", report.skipped);
    let broken: Vec<String> = report.failures.iter().filter(|o| o.broken).map(|o| format!("{} {}", o.transformation, o.case)).collect();
    assert!(broken.is_empty(), "rewrites that do not parse: {broken:?}");
    assert!(report.findings > 100, "only {} findings in the originals", report.findings);
    assert_eq!(report.per_transformation.len(), transform::ALL.len());
    assert!(transform::ALL.len() >= 10, "issue 32 asks for at least ten transformations");
    for (name, today) in APPLIED_TODAY {
        let tally = report.per_transformation.iter().find(|t| t.name == *name).unwrap_or_else(|| panic!("{name} not run"));
        assert!(tally.applied * 10 >= today * 8, "{name} made {} rewrites, {today} when the harness was written", tally.applied);
    }
    let invariance = report.overall.invariance();
    println!("overall invariance: {invariance:.3} (regression floor {MIN_INVARIANCE}, goal of issue 32: 0.98)");
    assert!(
        invariance >= MIN_INVARIANCE,
        "overall invariance {invariance:.3} fell below {MIN_INVARIANCE}:\n{}",
        harness::details(&report)
    );
}

/// Drops every `with torch.no_grad():` line and dedents its body: *not* behaviour-preserving.
fn drop_no_grad(source: &str, _ctx: &Context) -> Option<Rewrite> {
    let mut changed = false;
    let mut out = String::new();
    let mut dedent: Option<usize> = None;
    for line in source.split_inclusive('\n') {
        let indent = line.len() - line.trim_start().len();
        if let Some(at) = dedent {
            if line.trim().is_empty() || indent > at {
                out.push_str(&line[4.min(indent)..]);
                continue;
            }
            dedent = None;
        }
        if line.trim_start().starts_with("with torch.no_grad():") {
            dedent = Some(indent);
            changed = true;
            out.push('\n');
            continue;
        }
        out.push_str(line);
    }
    changed.then(|| identity_rewrite(&out))
}

/// A rewrite of `text` whose line map is the identity.
fn identity_rewrite(text: &str) -> Rewrite {
    Rewrite::from_lines(text.to_owned(), (1..=text.lines().count().max(1)).map(Some).collect())
}

fn unchanged(source: &str, _ctx: &Context) -> Option<Rewrite> {
    Some(identity_rewrite(source))
}

static DROP_NO_GRAD: Transformation = Transformation { name: "drop-no-grad", summary: "not behaviour-preserving", apply: drop_no_grad };
static UNCHANGED: Transformation = Transformation { name: "unchanged", summary: "the identity", apply: unchanged };

#[test]
fn the_harness_sees_a_rewrite_that_changes_behaviour_and_passes_one_that_does_not() {
    let cases = cases::builtin().unwrap();
    let report = harness::run(&cases, &[&DROP_NO_GRAD, &UNCHANGED], None);
    let dropped = &report.per_transformation[0];
    assert!(dropped.applied > 5 && dropped.gained > 0, "{dropped:?}");
    assert!(dropped.invariance() < 0.9, "{dropped:?}");
    assert!(
        report.failures.iter().any(|o| o.transformation == "drop-no-grad" && o.gained.iter().any(|f| f.rule == "MEM001")),
        "removing `no_grad` must make MEM001 appear"
    );
    let same = &report.per_transformation[1];
    assert_eq!(same.applied, same.invariant, "{same:?}");
    // The details name each rewrite that changed findings, and what it lost or gained.
    let details = harness::details(&report);
    assert!(details.contains("drop-no-grad") && details.contains("gained MEM001 L"), "{details}");
}
