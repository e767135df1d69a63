//! A fast first answer after an edit inside one definition: the findings of the last
//! complete lint outside that definition, moved by the edit's length, and the findings
//! inside it from a lint of the module with every unrelated definition blanked out.
//!
//! Why it is only a first answer: the semantic model reads across definitions (the callers
//! of a function decide whether its forward pass runs under `no_grad`; a backward pass
//! anywhere in a scope makes its names tensors with history). The prediction keeps the
//! definitions the edited one names or is named by, and gives up where it can see a
//! dependency (a finding outside the definition whose evidence or fix lies in it, a
//! changed header, an edit outside any definition, a line added or removed) or where it
//! would save little (less than a quarter of the file left out). What it cannot see, the
//! complete lint that always follows it corrects (see `Server::schedule`), so the findings
//! a client ends up with are exactly those of a complete lint. `examples/predict_edits.rs`
//! measures how often the first answer is already exact.

use std::collections::HashSet;
use std::ops::Range;

use memlint_linter::Diagnostic;
use memlint_python::tree_sitter::{Node, Tree};

/// The last complete lint of a document: the text and tree it read and what it found.
pub struct Baseline {
    pub text: String,
    pub tree: Tree,
    pub diagnostics: Vec<Diagnostic>,
    /// The settings generation it was linted under.
    pub generation: u64,
}

/// A top-level definition whose body changed, in the old text and in the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditedDefinition {
    /// Its bytes in the old text.
    pub old: Range<usize>,
    /// Its bytes in the new text (the same start).
    pub new: Range<usize>,
}

impl EditedDefinition {
    fn delta(&self) -> isize {
        self.new.end as isize - self.old.end as isize
    }
}

/// The one top-level definition (function, class, decorated either) whose body holds every
/// byte in which `old_text` and `new_text` differ, with its header (decorators, name,
/// parameters, bases) unchanged; `None` when the texts differ anywhere else, or not at all.
pub fn edited_definition(old_text: &str, old_tree: &Tree, new_text: &str, new_tree: &Tree) -> Option<EditedDefinition> {
    let (old, new) = (old_text.as_bytes(), new_text.as_bytes());
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let room = old.len().min(new.len()) - prefix;
    let suffix = old.iter().rev().zip(new.iter().rev()).take(room).take_while(|(a, b)| a == b).count();
    if prefix == old.len() && prefix == new.len() {
        return None;
    }
    let old_changed = prefix..old.len() - suffix;
    let new_changed = prefix..new.len() - suffix;
    let old_def = top_level_definition_around(old_tree.root_node(), &old_changed)?;
    let new_def = top_level_definition_around(new_tree.root_node(), &new_changed)?;
    let (old_body, new_body) = (body_start(old_def)?, body_start(new_def)?);
    let same_header = old_def.start_byte() == new_def.start_byte()
        && old_def.kind() == new_def.kind()
        && old_text[old_def.start_byte()..old_body] == new_text[new_def.start_byte()..new_body];
    // The definition's end moves by exactly the edit's length: nothing after it changed.
    let same_tail = old.len() - old_def.end_byte() == new.len() - new_def.end_byte();
    // Messages and facts name lines (`after model.eval() (line 16)`): an edit that adds or
    // removes a line would leave those of the findings after it wrong.
    let same_lines = old[old_changed.clone()].iter().filter(|b| **b == b'\n').count()
        == new[new_changed.clone()].iter().filter(|b| **b == b'\n').count();
    (same_header && same_tail && same_lines && prefix >= old_body && prefix >= new_body)
        .then(|| EditedDefinition { old: old_def.byte_range(), new: new_def.byte_range() })
}

const DEFINITIONS: &[&str] = &["function_definition", "class_definition", "decorated_definition"];

/// The top-level definition whose bytes hold `changed` (an empty range: a point inside it).
fn top_level_definition_around<'t>(root: Node<'t>, changed: &Range<usize>) -> Option<Node<'t>> {
    let mut cursor = root.walk();
    let found = root.named_children(&mut cursor).find(|s| s.start_byte() <= changed.start && changed.end <= s.end_byte());
    found.filter(|s| DEFINITIONS.contains(&s.kind()) && !s.has_error())
}

/// Where the body of a definition starts (after a decorated definition's decorators).
fn body_start(definition: Node<'_>) -> Option<usize> {
    let definition = match definition.kind() {
        "decorated_definition" => definition.child_by_field_name("definition")?,
        _ => definition,
    };
    Some(definition.child_by_field_name("body")?.start_byte())
}

/// The name a top-level definition binds.
fn definition_name<'s>(definition: Node<'_>, text: &'s str) -> Option<&'s str> {
    let definition = match definition.kind() {
        "decorated_definition" => definition.child_by_field_name("definition")?,
        _ => definition,
    };
    Some(&text[definition.child_by_field_name("name")?.byte_range()])
}

/// `text` with every top-level definition turned into spaces (line breaks kept) unless it
/// is `edited` or tied to what is kept by name: every byte keeps its offset, so findings in
/// it need no translation. Kept: the module's other statements (imports, the script at the
/// bottom), the edited definition, and, until nothing changes, each definition whose name
/// kept code uses (a helper it calls, a class it builds) or which uses the name of a kept
/// definition (its callers, whose `no_grad` can decide its findings).
///
/// `None` when less than a quarter of the text would be blanked: the prediction would cost
/// about what the complete lint costs, which then runs anyway.
pub fn blank_unrelated(text: &str, tree: &Tree, edited: &Range<usize>) -> Option<String> {
    let root = tree.root_node();
    let mut cursor = root.walk();
    let statements: Vec<Node<'_>> = root.named_children(&mut cursor).collect();
    let mut kept_words: HashSet<&str> = HashSet::new();
    let mut kept_names: HashSet<&str> = HashSet::new();
    // The definitions not (yet) kept: their range, name and words.
    let mut blanked: Vec<(Range<usize>, Option<&str>, HashSet<&str>)> = Vec::new();
    for s in &statements {
        let own = &text[s.byte_range()];
        if !DEFINITIONS.contains(&s.kind()) || s.byte_range() == *edited {
            kept_words.extend(words(own));
            kept_names.extend(DEFINITIONS.contains(&s.kind()).then(|| definition_name(*s, text)).flatten());
        } else {
            blanked.push((s.byte_range(), definition_name(*s, text), words(own).collect()));
        }
    }
    loop {
        let before = blanked.len();
        let (now_kept, still): (Vec<_>, Vec<_>) = blanked
            .into_iter()
            .partition(|(_, name, own)| name.is_some_and(|n| kept_words.contains(n)) || own.iter().any(|w| kept_names.contains(w)));
        blanked = still;
        for (_, name, own) in now_kept {
            kept_words.extend(own);
            kept_names.extend(name);
        }
        if blanked.len() == before {
            break;
        }
    }
    if blanked.iter().map(|(range, _, _)| range.len()).sum::<usize>() * 4 < text.len() {
        return None;
    }
    let mut bytes = text.as_bytes().to_vec();
    for (range, _, _) in &blanked {
        for b in &mut bytes[range.clone()] {
            if *b != b'\n' && *b != b'\r' {
                *b = b' ';
            }
        }
    }
    // Only ASCII bytes were written, over whole UTF-8 sequences (a node's range).
    String::from_utf8(bytes).ok()
}

/// The words (names) of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// Does `range` touch `span` (an empty range at a point inside it counts)?
fn touches(range: &Range<usize>, span: &Range<usize>) -> bool {
    range.start < span.end && range.end > span.start || (range.is_empty() && span.contains(&range.start))
}

fn shift(range: &mut Range<usize>, from: usize, delta: isize) {
    if range.start >= from {
        range.start = range.start.wrapping_add_signed(delta);
        range.end = range.end.wrapping_add_signed(delta);
    }
}

/// The baseline's findings outside the edited definition, moved to the new text; `None`
/// when one of them rests on something inside it (a fact or a fix edit there).
pub fn findings_outside(baseline: &[Diagnostic], edited: &EditedDefinition) -> Option<(Vec<Diagnostic>, Vec<Diagnostic>)> {
    let span = &edited.old;
    let mut before = Vec::new();
    let mut after = Vec::new();
    for d in baseline {
        if touches(&d.range, span) {
            continue;
        }
        let mut places =
            d.evidence.iter().filter_map(|f| f.range.as_ref()).chain(d.fix.iter().flat_map(|f| f.edits.iter().map(|e| &e.range)));
        if places.any(|r| touches(r, span)) {
            return None;
        }
        let mut moved = d.clone();
        shift(&mut moved.range, span.end, edited.delta());
        for fact in &mut moved.evidence {
            if let Some(r) = &mut fact.range {
                shift(r, span.end, edited.delta());
            }
        }
        if let Some(fix) = &mut moved.fix {
            for e in &mut fix.edits {
                shift(&mut e.range, span.end, edited.delta());
            }
        }
        if d.range.start < span.start {
            before.push(moved)
        } else {
            after.push(moved)
        }
    }
    Some((before, after))
}

/// The predicted findings of `text` after an edit of `baseline`, `lint` linting a source
/// (a blanked copy of `text`); `None` when the edit is not one a prediction can follow.
/// The baseline's own text (an edit undone) has the baseline's findings.
pub fn predict(baseline: &Baseline, text: &str, tree: &Tree, lint: &dyn Fn(&str) -> Option<Vec<Diagnostic>>) -> Option<Vec<Diagnostic>> {
    if baseline.text == text {
        return Some(baseline.diagnostics.clone());
    }
    let edited = edited_definition(&baseline.text, &baseline.tree, text, tree)?;
    let (mut found, after) = findings_outside(&baseline.diagnostics, &edited)?;
    let blanked = blank_unrelated(text, tree, &edited.new)?;
    let inside = lint(&blanked)?;
    found.extend(inside.into_iter().filter(|d| edited.new.contains(&d.range.start)));
    found.extend(after);
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlint_linter::{lint, LinterSettings};

    const TWO: &str = "import torch\n\n\ndef train(model, loader, optimizer):\n    total = 0\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n        total += loss\n        torch.cuda.empty_cache()\n    return total\n\n\ndef evaluate(model, loader):\n    model.eval()\n    outs = []\n    for x, _ in loader:\n        outs.append(model(x))\n    return outs\n";

    fn parse(text: &str) -> Tree {
        memlint_python::parse_with(text, None)
    }

    fn lint_text(text: &str) -> Vec<Diagnostic> {
        lint(text, &LinterSettings::default()).diagnostics
    }

    fn baseline(text: &str) -> Baseline {
        Baseline { text: text.to_owned(), tree: parse(text), diagnostics: lint_text(text), generation: 0 }
    }

    /// `text` with `find` (which occurs once) replaced by `with`.
    fn edit(text: &str, find: &str, with: &str) -> String {
        assert_eq!(text.matches(find).count(), 1, "{find:?} must occur once");
        text.replacen(find, with, 1)
    }

    fn prediction(old: &str, new: &str) -> Option<Vec<Diagnostic>> {
        predict(&baseline(old), new, &parse(new), &|s| Some(lint_text(s)))
    }

    #[test]
    fn an_edit_inside_a_body_names_its_definition() {
        let new = edit(TWO, "    outs.append", "    outs.appxend");
        let found = edited_definition(TWO, &parse(TWO), &new, &parse(&new)).unwrap();
        let start = TWO.find("def evaluate").unwrap();
        assert_eq!(found.old, start..TWO.trim_end().len());
        assert_eq!(found.new, start..new.trim_end().len());
    }

    #[test]
    fn an_edit_of_a_header_or_between_definitions_is_not_followed() {
        for (find, with) in [
            ("def evaluate(model, loader)", "def evaluate(model, loader, d)"),
            ("import torch\n", "import torch as t\n"),
            ("\n\n\ndef evaluate", "\nx = 1\n\ndef evaluate"),
        ] {
            let new = edit(TWO, find, with);
            assert_eq!(edited_definition(TWO, &parse(TWO), &new, &parse(&new)), None, "{find:?} -> {with:?}");
        }
        assert_eq!(edited_definition(TWO, &parse(TWO), TWO, &parse(TWO)), None, "no edit");
    }

    #[test]
    fn a_prediction_moves_the_findings_after_the_edit_and_relints_the_edited_body() {
        // `total` renamed in one place: the accumulation's finding goes, the others stay.
        let new = edit(TWO, "        total += loss", "        totxal += loss");
        assert_eq!(prediction(TWO, &new).unwrap(), lint_text(&new));
        let new = edit(TWO, "    total = 0\n", "    total = 0; seen = 0\n");
        assert_eq!(prediction(TWO, &new).unwrap(), lint_text(&new));
        let new = edit(TWO, "    model.eval()\n", "    model.eval(); print('x')\n");
        assert_eq!(prediction(TWO, &new).unwrap(), lint_text(&new));
        // A line added: the lines named in the messages after it would change.
        let new = edit(TWO, "    total = 0\n", "    total = 0\n    seen = 0\n");
        assert_eq!(prediction(TWO, &new), None);
    }

    /// What a prediction cannot see: `evaluate`'s finding depends on its caller's `no_grad`,
    /// and the edit is in the caller. The server's complete lint corrects it.
    const CALLER: &str = "import torch\n\n\ndef evaluate(model, loader):\n    model.eval()\n    outs = []\n    for x in loader:\n        outs.append(model(x).argmax(1).tolist())\n    return outs\n\n\ndef run(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n\n\ndef summarize(values):\n    count = 0\n    for v in values:\n        count += 1\n    average = sum(values) / max(count, 1)\n    print(f\"{count} values, average {average:.3f}\")\n    return average\n";

    #[test]
    fn a_finding_that_rests_on_a_caller_is_not_foreseen() {
        let new = edit(CALLER, "torch.no_grad", "torch.nxo_grad");
        assert!(lint_text(CALLER).is_empty());
        assert_eq!(lint_text(&new).len(), 1);
        assert_eq!(prediction(CALLER, &new), Some(Vec::new()));
    }

    #[test]
    fn the_baselines_own_text_has_its_findings() {
        assert_eq!(prediction(TWO, TWO).unwrap(), lint_text(TWO));
    }

    #[test]
    fn a_finding_outside_whose_evidence_is_inside_stops_the_prediction() {
        let mut d = lint_text(TWO).into_iter().next().unwrap();
        let inside = TWO.find("def evaluate").unwrap() + 20;
        d.evidence.push(memlint_python::Fact { text: "there".into(), range: Some(inside..inside + 3) });
        let edited = EditedDefinition { old: inside - 20..TWO.len(), new: inside - 20..TWO.len() + 1 };
        assert!(findings_outside(&[d.clone()], &edited).is_none());
        d.evidence.pop();
        assert!(findings_outside(&[d], &edited).is_some());
    }

    #[test]
    fn blanking_keeps_offsets_and_the_definitions_tied_by_name() {
        let text = "import torch\n\ndef helper(m):\n    return m\n\ndef other():\n    é = 1\n    for i in range(10):\n        print(i, é)\n    return é\n\ndef train(model):\n    return helper(model)\n\ndef caller():\n    train(None)\n";
        let tree = parse(text);
        let train = text.find("def train").unwrap();
        let end = text.find("\n\ndef caller").unwrap();
        let blanked = blank_unrelated(text, &tree, &(train..end)).unwrap();
        assert_eq!(blanked.len(), text.len());
        assert_eq!(blanked.lines().count(), text.lines().count());
        assert!(blanked.contains("def helper(m)") && blanked.contains("def caller()") && blanked.contains("import torch"));
        assert!(!blanked.contains("def other"));
    }

    #[test]
    fn a_module_tied_together_is_not_blanked() {
        // `main` at the bottom calls everything: nothing much would be left out.
        let text = "def a():\n    return 1\n\ndef b():\n    return a()\n\ndef main():\n    print(a(), b())\n\nmain()\n";
        let tree = parse(text);
        assert_eq!(blank_unrelated(text, &tree, &(0..text.find("\n\ndef b").unwrap())), None);
    }

    #[test]
    fn words_are_whole_names() {
        assert_eq!(words("x = train_1(y.é) # no").collect::<Vec<_>>(), ["x", "train_1", "y", "é", "no"]);
    }
}
