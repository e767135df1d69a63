//! Skipping function bodies that cannot matter: the second stage of the pre-filter.
//!
//! A file the word pre-filter lets through is often a model library in which one method
//! in fifty could report something. Parsing is memlint's main cost, so before parsing,
//! the body of each module-level function and method ([`crate::outline`]) that cannot
//! matter is blanked: its bytes become spaces (newlines kept) and its first statement a
//! `0`, so the tree has the same byte offsets, lines and columns, and tree-sitter parses
//! whitespace where the body was.
//!
//! A body is kept when
//! - some enabled rule could report something in it (its words meet that rule's
//!   condition, [`crate::prefilter`]), or it holds a `memlint:` / `noqa` comment;
//! - it mentions a function whose body is kept (it may call it, and a function only
//!   called from no-grad code runs without gradients);
//! - it defines a class or function that kept code names (the semantic model knows
//!   classes by name);
//! - it may assign `self.X` for an `X` that kept code names (the semantic model reads
//!   `self.X` from any method).
//!
//! and these are followed to a fixed point. Everything else the semantic model reads —
//! imports, bindings, loops, backward calls — is scoped to the function it is in. Only
//! the rules for which that holds allow skipping ([`crate::prefilter::body_matters`]).
//!
//! After parsing, each blanked body must have parsed as a one-statement body of its
//! function and the tree must be free of errors, else the file is parsed whole. So the
//! findings are the same as with a whole parse for any file without syntax errors; a
//! syntax error inside a skipped body is not reported (as in a file the pre-filter skips).

use std::ops::Range;

use rustc_hash::FxHashSet;

use memlint_python::tree_sitter::Tree;

use crate::outline::outline;
use crate::prefilter::{body_matters, Words};
use crate::RuleSelection;

/// A source with the bodies that cannot matter left out of parsing.
pub(crate) struct Blanked {
    /// The source with a `0` at the start of each left-out body (same length).
    pub source: String,
    /// The left-out bodies, and where each one's `0` statement is.
    pub bodies: Vec<(Range<usize>, usize)>,
    /// What the parser reads: everything but the bodies after their `0`.
    pub included: Vec<Range<usize>>,
}

impl Blanked {
    /// Parses what is left.
    pub fn parse(&self) -> Option<Tree> {
        memlint_python::parse_ranges(&self.source, &self.included)
    }
}

/// Why a body is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    /// Some rule could report something in it, or it holds a directive comment.
    Matters,
    /// It may call a function whose gradient context matters.
    Calls,
    /// It defines a class or function, or assigns a `self.` attribute, that kept code names.
    Provides,
}

pub(crate) struct Candidate<'a> {
    pub body: crate::outline::FunctionBody<'a>,
    words: Words<'a>,
    pub kept: Option<Kept>,
}

/// Decides which function bodies of `source` must be parsed for `possible`; `None` when
/// the outline scan gives up or some rule allows no skipping.
pub(crate) fn decide<'a>(source: &'a str, file: &Words<'_>, possible: &RuleSelection) -> Option<Vec<Candidate<'a>>> {
    let outline = outline(source)?;
    let quiet = &outline.quiet;
    let mut candidates = Vec::with_capacity(outline.bodies.len());
    for body in outline.bodies {
        let text = &source[body.range.clone()];
        // Comments and docstrings do not count: nothing reads them.
        let words = Words::scan_except(text, body.range.start, quiet);
        let mut matters = has_directive(text);
        for rule in possible.iter() {
            match body_matters(rule, &words, text, body.name, file) {
                None => return None,
                Some(true) => matters = true,
                Some(false) => {}
            }
        }
        candidates.push(Candidate { body, words, kept: matters.then_some(Kept::Matters) });
    }
    if candidates.iter().all(|c| c.kept.is_some()) {
        return Some(candidates);
    }

    // What kept code names, and the functions whose gradient context matters: those with
    // code that could report something, and their callers (a function only called from
    // no-grad code runs without gradients). The code between the bodies (module level,
    // class bodies, `def` headers) is always kept; its `def`s are the candidates' headers
    // plus functions the outline does not split (in an `if`), which may report.
    let mut named: FxHashSet<&str> = FxHashSet::default();
    let mut status_matters: FxHashSet<&str> = FxHashSet::default();
    let mut header_names: Vec<&str> = Vec::new();
    let mut start = 0;
    for end in candidates.iter().map(|c| c.body.range.clone()).chain(std::iter::once(source.len()..source.len())) {
        let gap = Words::scan_except(&source[start..end.start], start, quiet);
        named.extend(gap.identifiers.iter().copied());
        header_names.extend(gap.functions.iter().copied());
        start = end.end;
    }
    for c in &candidates {
        if let Some(at) = header_names.iter().position(|n| *n == c.body.name) {
            header_names.swap_remove(at);
        }
    }
    status_matters.extend(header_names);
    let mut status_known = vec![false; candidates.len()];
    for (i, c) in candidates.iter().enumerate() {
        if c.kept.is_some() {
            named.extend(c.words.identifiers.iter().copied());
            status_matters.insert(c.body.name);
            status_matters.extend(c.words.functions.iter().copied());
            status_known[i] = true;
        }
    }
    loop {
        let mut changed = false;
        for (i, c) in candidates.iter_mut().enumerate() {
            if !status_known[i] && c.words.identifiers.iter().any(|w| status_matters.contains(w)) {
                if c.kept.is_none() {
                    named.extend(c.words.identifiers.iter().copied());
                }
                c.kept = Some(c.kept.unwrap_or(Kept::Calls));
                status_matters.insert(c.body.name);
                status_matters.extend(c.words.functions.iter().copied());
                status_known[i] = true;
                changed = true;
            }
            if c.kept.is_none() {
                let defines_named = c.words.functions.iter().chain(&c.words.classes).any(|d| named.contains(d));
                let assigns_named = c.words.self_assigned.iter().any(|a| named.contains(a));
                if defines_named || assigns_named {
                    c.kept = Some(Kept::Provides);
                    named.extend(c.words.identifiers.iter().copied());
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    Some(candidates)
}

/// Blanks the function bodies of `source` that cannot change what `possible` reports;
/// `None` when nothing can be skipped.
pub(crate) fn blank_irrelevant_bodies(source: &str, file: &Words<'_>, possible: &RuleSelection) -> Option<Blanked> {
    let candidates = decide(source, file, possible)?;
    if candidates.iter().all(|c| c.kept.is_some()) {
        return None;
    }
    let mut bytes = source.as_bytes().to_vec();
    let mut bodies = Vec::new();
    let mut included = Vec::new();
    let mut start = 0;
    for c in candidates.iter().filter(|c| c.kept.is_none()) {
        let first = c.body.first_statement;
        // The first statement becomes `0` (the rest of a multi-byte character, left out
        // of parsing anyway, becomes spaces so the text stays UTF-8).
        bytes[first] = b'0';
        for b in bytes[first + 1..].iter_mut().take_while(|b| (0x80..0xC0).contains(*b)) {
            *b = b' ';
        }
        included.push(start..first + 1);
        start = c.body.range.end;
        bodies.push((c.body.range.clone(), first));
    }
    included.push(start..source.len());
    let source = String::from_utf8(bytes).ok()?;
    Some(Blanked { source, bodies, included })
}

/// A suppression or `memlint:` comment could be in the body (`# memlint: skip-file`
/// anywhere skips the file).
fn has_directive(text: &str) -> bool {
    memchr::memchr_iter(b'#', text.as_bytes()).any(|at| {
        let comment = text[at..].lines().next().unwrap_or("").to_ascii_lowercase();
        comment.contains("noqa") || comment.contains("memlint")
    })
}

/// Did every blanked body parse as a function body of one statement, in a tree without
/// errors? If not, the file must be parsed whole.
pub(crate) fn parsed_as_blanked(tree: &Tree, blanked: &Blanked) -> bool {
    let root = tree.root_node();
    if root.has_error() {
        return false;
    }
    blanked.bodies.iter().all(|(_, first)| {
        let Some(zero) = root.descendant_for_byte_range(*first, *first + 1) else { return false };
        let statement = zero.parent().filter(|s| zero.kind() == "integer" && s.kind() == "expression_statement");
        let block = statement.and_then(|s| s.parent()).filter(|b| b.kind() == "block");
        let Some(block) = block else { return false };
        let mut cursor = block.walk();
        let statements = block.named_children(&mut cursor).filter(|c| c.kind() != "comment").count();
        statements == 1 && block.parent().map(|f| f.kind() == "function_definition").unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::blank_irrelevant_bodies;
    use crate::prefilter::{possible_rules, Words};
    use crate::RuleSelection;

    /// The names of the functions whose bodies are blanked.
    fn blanked(source: &str) -> Vec<String> {
        let words = Words::scan(source);
        let possible = possible_rules(source, &words, &RuleSelection::all());
        let Some(b) = blank_irrelevant_bodies(source, &words, &possible) else { return Vec::new() };
        assert_eq!(b.source.len(), source.len());
        let tree = b.parse().expect("ranges are sorted");
        assert!(super::parsed_as_blanked(&tree, &b), "{}", tree.root_node().to_sexp());
        let mut names = Vec::new();
        for (range, _) in &b.bodies {
            let header = &source[..range.start];
            let def = header.rfind("def ").expect("a def before each body");
            names.push(header[def + 4..].split('(').next().unwrap().to_owned());
        }
        names
    }

    const EVAL: &str = "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n    for x in loader:\n        model(x)\n";

    #[test]
    fn bodies_no_rule_can_fire_in_are_blanked() {
        let source = format!("{EVAL}\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = torch.nn.Linear(2, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n");
        assert_eq!(blanked(&source), ["__init__", "forward"]);
    }

    #[test]
    fn a_caller_of_a_kept_function_is_kept() {
        let source = format!("{EVAL}\ndef main(model, loader):\n    with torch.no_grad():\n        evaluate(model, loader)\n\ndef unrelated():\n    return 1\n");
        assert_eq!(blanked(&source), ["unrelated"]);
    }

    #[test]
    fn a_method_assigning_an_attribute_kept_code_reads_is_kept() {
        let source = "import torch\n\nclass Runner:\n    def setup(self):\n        self.net = torch.nn.Linear(2, 2)\n        self.other = 1\n\n    def predict(self, x):\n        return self.net(x)\n\n    def helper(self):\n        return self.other\n";
        assert_eq!(blanked(source), ["helper"]);
    }

    #[test]
    fn a_class_defined_in_a_body_and_named_elsewhere_is_kept() {
        let source = "import torch\n\ndef make():\n    class Head(torch.nn.Module):\n        pass\n    return Head\n\ndef predict(x):\n    return Head()(x)\n";
        assert_eq!(blanked(source), Vec::<String>::new());
    }

    #[test]
    fn suppression_comments_keep_a_body() {
        let source = format!("{EVAL}\ndef f():\n    x = 1  # memlint: skip-file\n    return x\n");
        assert_eq!(blanked(&source), Vec::<String>::new());
    }

    #[test]
    fn a_rule_that_reads_other_functions_disables_skipping() {
        // MEM012 follows every use of a pretrained network through the module.
        let source = format!("{EVAL}\nimport torchvision\n\ndef train(x):\n    net = torchvision.models.vgg16(weights='DEFAULT')\n    net(x).sum().backward()\n\ndef f():\n    return 1\n");
        assert_eq!(blanked(&source), Vec::<String>::new());
    }

    #[test]
    fn a_body_scaling_the_loss_is_kept_for_half_without_grad_scaler() {
        let source = "import torch\n\ndef train(model, x):\n    model.half()\n    model(x).sum().backward()\n\ndef make():\n    return torch.amp.GradScaler()\n\ndef f():\n    return 1\n";
        assert_eq!(blanked(source), ["f"]);
    }

    #[test]
    fn an_import_alias_of_a_trigger_word_counts() {
        let source = "from torch.cuda import empty_cache as ec\n\ndef step(model, loader):\n    for x in loader:\n        ec()\n\ndef f():\n    return 1\n";
        assert_eq!(blanked(source), ["f"]);
    }
}

