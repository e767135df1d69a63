//! Each scenario runs its rule's documentation example: the Python a scenario carries is the
//! rule's `## Example` / `Use instead:` (from the linter's rule documentation, the same text as
//! docs/rules/<name>.md), and the PyTorch script of `--compare-torch` runs those same lines.

use memlint_linter::Rule;
use memlint_verify::scenarios::{self, ScenarioDef};

/// The Python code blocks of a rule's documentation: (the block after `## Example`, the block after
/// `Use instead:`).
fn doc_examples(rule: Rule) -> (String, String) {
    let md = rule.doc().markdown;
    let block_after = |marker: &str| -> String {
        let start = md.find(marker).unwrap_or_else(|| panic!("{}: no `{marker}` in its documentation", rule.code()));
        let rest = &md[start..];
        let open = rest.find("```python\n").unwrap_or_else(|| panic!("{}: no python block after `{marker}`", rule.code())) + "```python\n".len();
        let close = rest[open..].find("\n```").unwrap_or_else(|| panic!("{}: unterminated block", rule.code()));
        rest[open..open + close].to_string()
    };
    (block_after("## Example"), block_after("Use instead:"))
}

fn rule_of(def: &ScenarioDef) -> Rule {
    let r = Rule::from_code_or_name(def.code).unwrap_or_else(|_| panic!("{} is not a rule", def.code));
    assert_eq!(r.name(), def.name, "{}: the scenario's name is the rule's", def.code);
    r
}

#[test]
fn documented_scenarios_carry_their_rules_examples_verbatim() {
    let mut documented = Vec::new();
    for def in scenarios::all().iter().filter(|d| d.from_doc) {
        let (example, instead) = doc_examples(rule_of(def));
        assert_eq!(def.python_bad, example, "{} {}: the bad loop is the rule's `## Example`", def.code, def.variant);
        assert_eq!(def.python_fixed, instead, "{} {}: the fixed loop is the rule's `Use instead:`", def.code, def.variant);
        documented.push(def.code);
    }
    // Every rule with a scenario runs its documentation example in at least one row.
    for def in scenarios::all() {
        assert!(documented.contains(&def.code), "{} has scenarios but none runs its documentation example", def.code);
    }
}

#[test]
fn variants_say_so_and_change_the_documented_loop_only_where_they_say() {
    for def in scenarios::all().iter().filter(|d| !d.from_doc) {
        assert!(def.description.starts_with("variant:"), "{} {}: a scenario not from the documentation describes itself as a variant", def.code, def.variant);
        let (example, instead) = doc_examples(rule_of(def));
        // A variant shares its anti-pattern or its fix with the documentation, or is the documented
        // loop with lines added: each documented line it keeps appears in it.
        let shares = def.python_bad == example || def.python_fixed == instead || def.python_bad.contains(example.lines().last().unwrap_or_default().trim());
        assert!(shares, "{} {}: a variant keeps something of the documented example", def.code, def.variant);
    }
}

/// The lines of `verify_torch.py` that are the documentation's: lines marked `# verify:` are the
/// harness's and left out.
fn script_lines() -> Vec<&'static str> {
    memlint_verify::torch::SCRIPT.lines().filter(|l| !l.contains("# verify:")).collect()
}

/// Whether `block` appears in the script as consecutive lines, at any indentation.
fn appears_in_script(block: &str, stand_ins: &[&str]) -> bool {
    let want: Vec<&str> = block.lines().filter(|l| !stand_ins.contains(&l.trim())).collect();
    let lines = script_lines();
    lines.windows(want.len()).any(|w| {
        let indent = w[0].len() - w[0].trim_start().len();
        w.iter().zip(&want).all(|(have, want)| have.len() >= indent && &have[indent.min(have.len())..] == *want && have[..indent].trim().is_empty())
    })
}

#[test]
fn the_pytorch_script_runs_every_scenarios_python() {
    for def in scenarios::all() {
        assert!(appears_in_script(def.python_bad, def.stand_ins), "{} {}: verify_torch.py does not run the bad loop:\n{}", def.code, def.variant, def.python_bad);
        assert!(appears_in_script(def.python_fixed, def.stand_ins), "{} {}: verify_torch.py does not run the fixed loop:\n{}", def.code, def.variant, def.python_fixed);
    }
}

#[test]
fn the_script_check_can_fail() {
    assert!(!appears_in_script("total_loss += loss.detach()", &[]));
    // A documented line changed in the script would be caught.
    assert!(!appears_in_script("for x, y in loader:\n    loss.backward(retain_graph=False)", &[]));
}

#[test]
fn the_script_names_each_scenario_row() {
    for def in scenarios::all() {
        let row = format!("(\"{}\", \"{}\",", def.code, def.variant);
        assert!(memlint_verify::torch::SCRIPT.contains(&row), "verify_torch.py has no row {row}");
    }
}
