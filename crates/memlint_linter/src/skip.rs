//! Skipping function bodies that cannot matter: the second stage of the pre-filter.
//!
//! A file the word pre-filter lets through is often a model library in which one method
//! in fifty could report something. Parsing is memlint's main cost, so before parsing,
//! the body of each module-level function and method ([`crate::outline`]) that cannot
//! matter is left out: tree-sitter parses only the included ranges, and a `0` written
//! where the body starts stands for it, so the tree keeps the file's byte offsets, lines
//! and columns. When no kept code uses the function's name as a bare name (`self.f` is an
//! attribute) and its decorators and header hold nothing that matters, the `0` stands for
//! the whole definition. Docstrings at outline level and assignments nothing kept names
//! (a `0` each) are left out as well. (Comments are not: tree-sitter looks up the
//! included range of every token it lexes from the first range on, so each range costs
//! more than the comment it would leave out.)
//!
//! A body is kept when
//! - some enabled rule could report something in it (its words meet that rule's
//!   condition, [`crate::prefilter::body_matters`]), or it holds a `memlint:` / `noqa`
//!   comment;
//! - it calls (by name, as the semantic model's call graph does) a function whose
//!   gradient context matters (one that could report, or that calls such a function)
//!   and that may run without gradients (a function only called from no-grad code runs
//!   without them; see `possibly_disabled`), or it is a `forward` calling such a function
//!   (a function named for evaluation that `forward` calls is not evaluation code);
//! - it defines a class or function that kept code names (the semantic model knows
//!   classes by name);
//! - it may assign `self.X` (other than a constant) for an `X` that kept code reads as
//!   `self.X` (the semantic model reads `self.X` from any method);
//! - for `frozen-network-tracks-grad`: it could construct a pretrained network, or it uses
//!   a `self.X` that such a body may assign (the rule follows every use).
//!
//! and these are followed to a fixed point, together with the assignments at module level
//! and in class bodies: one is kept when kept code names what it binds, when it calls a
//! function whose context matters, or when a rule could report in it. Everything else
//! the semantic model reads —
//! imports, bindings, loops, backward calls — is scoped to the function it is in.
//!
//! After parsing, the tree must be free of errors and each `0` must have parsed where it
//! stands (the one statement of its function's body, or a statement of a class body or
//! the module), else the file is parsed whole. So the findings are the same as with a
//! whole parse for any file without syntax errors; a syntax error inside a left-out body
//! is not reported (as in a file the pre-filter skips).

use std::ops::Range;

use rustc_hash::FxHashSet;

use memlint_python::tree_sitter::Tree;

use crate::outline::outline;
use crate::prefilter::{body_matters, FileWords, Words};
use crate::{Rule, RuleSelection};

/// A source with the bodies that cannot matter left out of parsing.
pub(crate) struct Blanked {
    /// The source with a `0` where each left-out piece starts; same length.
    pub source: String,
    /// What is left out, in source order.
    pub bodies: Vec<LeftOut>,
    /// What the parser reads: everything but the left-out pieces after their `0`.
    pub included: Vec<Range<usize>>,
}

impl Blanked {
    /// Parses what is left.
    pub fn parse(&self) -> Option<Tree> {
        memlint_python::parse_ranges(&self.source, &self.included)
    }
}

/// What a `0` statement stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stand {
    /// A function's body: the header is parsed.
    Body,
    /// A whole definition, decorators and header included.
    Definition,
    /// A statement that is a lone string.
    String,
    /// An assignment at module level or in a class body.
    Statement,
}

/// One left-out piece of the source.
pub(crate) struct LeftOut {
    /// From the `0` to the end of the body.
    pub range: Range<usize>,
    pub zero: usize,
    pub kind: Stand,
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
    /// Not kept, and neither are its decorators and header: nothing names the function
    /// and its header holds nothing that matters. The whole definition is left out.
    pub whole: bool,
}

/// What to parse of a file.
pub(crate) struct Decision<'a> {
    pub candidates: Vec<Candidate<'a>>,
    /// Docstrings and other lone strings at outline level: nothing reads them, so they
    /// are left out too (a `0` stands for each, keeping every block's statements).
    pub lone_strings: Vec<Range<usize>>,
    /// Assignments at module level or in a class body that bind nothing kept code names,
    /// and in which nothing matters (a `0` stands for each).
    pub assignments: Vec<Range<usize>>,
}

/// Decides which function bodies of `source` must be parsed for `possible`; `None` when
/// the outline scan gives up or some rule allows no skipping.
pub(crate) fn decide<'a>(source: &'a str, file: &FileWords<'_>, possible: &RuleSelection) -> Option<Decision<'a>> {
    let outline = outline(source)?;
    let lone_strings = outline.lone_strings.clone();
    let quiet = &outline.quiet;
    let pretrained = if possible.is_enabled(Rule::FrozenNetworkTracksGrad) {
        Some(PretrainedNetworks::find(source, &outline)?)
    } else {
        None
    };
    let mut candidates = Vec::with_capacity(outline.bodies.len());
    for body in outline.bodies {
        let text = &source[body.range.clone()];
        // Comments and docstrings do not count: nothing reads them.
        let words = Words::scan_body(text, body.range.start, quiet);
        let mut matters = has_directive(text);
        matters |= could_report(possible, pretrained.as_ref(), &words, text, body.name, file)?;
        candidates.push(Candidate { body, words, kept: matters.then_some(Kept::Matters), whole: false });
    }
    if let Some(p) = &pretrained {
        // Every use of `self.X` for an X a constructing method may assign decides
        // whether the network escapes (is trained, frozen, handed on).
        let networks: FxHashSet<&str> = candidates
            .iter()
            .filter(|c| p.constructs(&c.words))
            .flat_map(|c| c.words.self_assigned.iter().copied())
            .collect();
        for c in candidates.iter_mut().filter(|c| c.kept.is_none()) {
            if c.words.self_attributes.iter().any(|a| networks.contains(a)) {
                c.kept = Some(Kept::Matters);
            }
        }
    }

    // What kept code names, and the functions whose gradient context matters: those with
    // code that could report something, and their callers (a function only called from
    // no-grad code runs without gradients). The code between the bodies (module level,
    // class bodies, `def` headers) is always kept; its `def`s are the candidates' headers
    // plus functions the outline does not split (in an `if`), which may report.
    let mut named: FxHashSet<&str> = FxHashSet::default();
    // Names (not attributes) kept code uses: what a function's binding can matter to.
    let mut bare_named: FxHashSet<&str> = FxHashSet::default();
    let mut self_read: FxHashSet<&str> = FxHashSet::default();
    let mut status_matters: FxHashSet<&str> = FxHashSet::default();
    // The code between definitions, and each header without its own name (whether the
    // function is named elsewhere decides whether its header can go too).
    let mut outside = Outside::default();
    let disabling = GradDisabling::find(source);
    // Assignments at outline level count as kept code only once kept: one can go when
    // nothing kept names what it binds (its words are left out of the code between
    // bodies, and added when it is kept).
    let mut assignments: Vec<OutlineAssignment> = Vec::new();
    for a in &outline.assignments {
        let text = &source[a.range.clone()];
        let targets = &source[a.targets.clone()];
        let words = Words::scan_except(text, a.range.start, quiet);
        outside.calls.extend(words.calls.iter().copied());
        outside.disables |= disabling.within(a.range.clone());
        // Only plain names are bound (`x.y = v` and `x[i] = v` act on other values); a
        // comprehension, lambda or `:=` binds names of its own in the semantic model.
        // `x: T = v` binds `x`: the annotation may hold anything.
        let targets = targets.split_once(':').map(|(names, _)| names).unwrap_or(targets);
        let plain = !targets.contains(['.', '[', '(']) && !text.contains(":=") && !words.has("for") && !words.has("lambda");
        let mut matters = !plain || has_directive(text);
        matters |= could_report(possible, pretrained.as_ref(), &words, text, "", file) != Some(false);
        let bound = Words::scan_except(targets, a.targets.start, quiet).identifiers.into_iter().collect();
        // (The annotation's names are in `words`: they count once the assignment is kept.)
        assignments.push(OutlineAssignment { range: a.range.clone(), bound, words, kept: matters });
    }
    let quiet_outside = crate::merge_ranges(quiet.iter().cloned().chain(outline.assignments.iter().map(|a| a.range.clone())));
    let quiet = &quiet_outside;
    let mut headers = Vec::with_capacity(candidates.len());
    let mut start = 0;
    let name_at = |c: &Candidate<'_>| c.body.name.as_ptr() as usize - source.as_ptr() as usize;
    for c in &candidates {
        let name = name_at(c);
        let before = Words::scan_except(&source[start..c.body.outer_start], start, quiet);
        let header = Words::scan_except(&source[c.body.outer_start..name], c.body.outer_start, quiet);
        let after = Words::scan_except(&source[name + c.body.name.len()..c.body.range.start], name + c.body.name.len(), quiet);
        for words in [&before, &header, &after] {
            named.extend(words.identifiers.iter().copied());
            bare_named.extend(words.bare.iter().copied());
            self_read.extend(words.self_attributes.iter().copied());
        }
        // Functions the outline does not split (in an `if`) may report.
        status_matters.extend(before.functions.iter().copied());
        for words in [&before, &header, &after] {
            outside.calls.extend(words.calls.iter().copied());
        }
        outside.functions.extend(before.functions.iter().copied());
        outside.disables |= disabling.within(start..c.body.range.start);
        headers.push((header, after));
        start = c.body.range.end;
    }
    let rest = Words::scan_except(&source[start..], start, quiet);
    named.extend(rest.identifiers.iter().copied());
    bare_named.extend(rest.bare.iter().copied());
    self_read.extend(rest.self_attributes.iter().copied());
    status_matters.extend(rest.functions.iter().copied());
    outside.calls.extend(rest.calls.iter().copied());
    outside.functions.extend(rest.functions.iter().copied());
    outside.disables |= disabling.within(start..source.len());
    // Callers matter because a function only called from no-grad code runs without
    // gradients: only for a function that may run without them. (A caller named
    // `forward` matters anyway: a function named for evaluation that `forward` calls is
    // not evaluation code.)
    let possibly_disabled = possibly_disabled(&disabling, &candidates, &headers, &outside);
    let mut status_known = vec![false; candidates.len()];
    for (i, c) in candidates.iter().enumerate() {
        if c.kept.is_some() {
            named.extend(c.words.identifiers.iter().copied());
            self_read.extend(c.words.self_attributes.iter().copied());
            status_matters.insert(c.body.name);
            status_matters.extend(c.words.functions.iter().copied());
            status_known[i] = true;
        }
    }
    for a in assignments.iter().filter(|a| a.kept) {
        named.extend(a.words.identifiers.iter().copied());
        self_read.extend(a.words.self_attributes.iter().copied());
    }
    loop {
        let mut changed = false;
        // An assignment binding a name kept code uses, or calling a function whose
        // gradient context matters, is kept code.
        for a in assignments.iter_mut().filter(|a| !a.kept) {
            if a.bound.iter().any(|n| named.contains(n)) || a.words.calls.iter().any(|w| status_matters.contains(w)) {
                a.kept = true;
                named.extend(a.words.identifiers.iter().copied());
                self_read.extend(a.words.self_attributes.iter().copied());
                changed = true;
            }
        }
        for (i, c) in candidates.iter_mut().enumerate() {
            let forward = c.body.name == "forward" || c.words.functions.contains(&"forward");
            let calls_one = || c.words.calls.iter().any(|w| status_matters.contains(w) && (forward || possibly_disabled.contains(w)));
            if !status_known[i] && calls_one() {
                if c.kept.is_none() {
                    named.extend(c.words.identifiers.iter().copied());
                    self_read.extend(c.words.self_attributes.iter().copied());
                }
                c.kept = Some(c.kept.unwrap_or(Kept::Calls));
                status_matters.insert(c.body.name);
                status_matters.extend(c.words.functions.iter().copied());
                status_known[i] = true;
                changed = true;
            }
            if c.kept.is_none() {
                let defines_named = c.words.functions.iter().chain(&c.words.classes).any(|d| named.contains(d));
                let assigns_read = c.words.self_assigned.iter().any(|a| self_read.contains(a));
                if defines_named || assigns_read {
                    c.kept = Some(Kept::Provides);
                    named.extend(c.words.identifiers.iter().copied());
                    self_read.extend(c.words.self_attributes.iter().copied());
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    // Kept bodies' names (not attributes), scanned only now that they are known.
    for c in candidates.iter_mut().filter(|c| c.kept.is_some()) {
        c.words.collect_bare(&source[c.body.range.clone()], c.body.range.start, quiet);
        bare_named.extend(c.words.bare.iter().copied());
    }
    for a in assignments.iter().filter(|a| a.kept) {
        bare_named.extend(a.words.bare.iter().copied());
    }
    // A definition whose name no kept code uses as a name (`self.f` is an attribute: the
    // semantic model looks bindings up for bare names only), whose decorators, parameters and annotations call no
    // function that matters and hold nothing a rule reports, goes whole.
    for (c, (header, after)) in candidates.iter_mut().zip(&headers) {
        if c.kept.is_some() || bare_named.contains(c.body.name) {
            continue;
        }
        let header_text = &source[c.body.outer_start..c.body.range.start];
        let calls_matter = header.calls.iter().chain(&after.calls).any(|w| status_matters.contains(w));
        let reports = [header, after].iter().any(|w| could_report(possible, pretrained.as_ref(), w, header_text, "", file) != Some(false));
        c.whole = !calls_matter && !reports && !has_directive(header_text);
    }
    let assignments = assignments.into_iter().filter(|a| !a.kept).map(|a| a.range).collect();
    Some(Decision { candidates, lone_strings, assignments })
}

/// An assignment at outline level ([`crate::outline::Assignment`]), as decided.
struct OutlineAssignment<'a> {
    range: Range<usize>,
    /// The names before its first `=`.
    bound: Vec<&'a str>,
    words: Words<'a>,
    kept: bool,
}

/// Could some enabled rule report in code with these `words` (`text`, in a function
/// named `name`, or `""`)? `None` when a rule allows no skipping.
fn could_report(
    possible: &RuleSelection,
    pretrained: Option<&PretrainedNetworks<'_>>,
    words: &Words<'_>,
    text: &str,
    name: &str,
    file: &FileWords<'_>,
) -> Option<bool> {
    let mut reports = false;
    for rule in possible.iter() {
        reports |= match (rule, pretrained) {
            (Rule::FrozenNetworkTracksGrad, Some(p)) => p.constructs_or_trains(words),
            _ => body_matters(rule, words, text, name, file)?,
        };
    }
    Some(reports)
}

/// The code outside function bodies (module level, class bodies, headers), as far as
/// gradient contexts go.
#[derive(Default)]
struct Outside<'a> {
    calls: FxHashSet<&'a str>,
    /// Functions the outline does not split (in an `if`): their call sites are outside.
    functions: Vec<&'a str>,
    /// Some of it may disable gradients.
    disables: bool,
}

/// The names of the functions that may run without gradients, to a fixed point: those
/// decorated to (or whose body may disable gradients around a nested definition), the
/// Lightning hooks that do, and every function called where gradients may be disabled:
/// in a body or outside code that may disable them, or in a function that may run
/// without them. Any other function runs with gradients whichever of its callers are
/// parsed, so its callers need not be.
fn possibly_disabled<'a>(
    disabling: &GradDisabling,
    candidates: &[Candidate<'a>],
    headers: &[(Words<'a>, Words<'a>)],
    outside: &Outside<'a>,
) -> FxHashSet<&'a str> {
    let mut names: FxHashSet<&str> = FxHashSet::default();
    if disabling.at.is_empty() {
        return names;
    }
    names.extend(["validation_step", "test_step", "predict_step"]);
    let body_disables: Vec<bool> = candidates.iter().map(|c| disabling.within(c.body.range.clone())).collect();
    for (c, disables) in candidates.iter().zip(&body_disables) {
        if disabling.within(c.body.outer_start..c.body.range.start) {
            names.insert(c.body.name);
        }
        if *disables {
            names.extend(c.words.functions.iter().copied());
        }
    }
    if outside.disables {
        names.extend(outside.functions.iter().copied());
    }
    loop {
        let before = names.len();
        for ((c, (header, after)), disables) in candidates.iter().zip(headers).zip(&body_disables) {
            // Calls in a nested function count as the body's.
            let sites_may_be_disabled =
                *disables || names.contains(c.body.name) || c.words.functions.iter().any(|f| names.contains(f));
            if sites_may_be_disabled {
                for words in [&c.words, header, after] {
                    names.extend(words.calls.iter().copied());
                }
            }
        }
        if outside.disables || outside.functions.iter().any(|f| names.contains(f)) {
            names.extend(outside.calls.iter().copied());
        }
        if names.len() == before {
            return names;
        }
    }
}

/// Where code of a file may disable gradients: a `no_grad`, `inference_mode` or
/// `set_grad_enabled` context or decorator (under any name an import gives it: the
/// import names it), or a Lightning hook that runs under `no_grad`. ASCII
/// case-insensitive, as the semantic model reads decorator names.
struct GradDisabling {
    /// The byte ranges of those words, in order.
    at: Vec<Range<usize>>,
}

impl GradDisabling {
    fn find(source: &str) -> Self {
        static WORDS: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
        let words = WORDS.get_or_init(|| {
            // Leftmost-first (any occurrence will do) lets it use its SIMD prefilter.
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(["no_grad", "nograd", "inference", "set_grad_enabled", "validation_step", "test_step", "predict_step"])
                .expect("plain words build an automaton")
        });
        // Searching a lower-case copy lets the automaton use its fast prefilter, which a
        // case-insensitive search cannot.
        let lower = source.to_ascii_lowercase();
        GradDisabling { at: words.find_iter(&lower).map(|m| m.range()).collect() }
    }

    /// Does one of the words overlap `range`?
    fn within(&self, range: Range<usize>) -> bool {
        let first = self.at.partition_point(|w| w.end <= range.start);
        self.at.get(first).map(|w| w.start < range.end).unwrap_or(false)
    }
}

/// Blanks the function bodies of `source` that cannot change what `possible` reports;
/// `None` when nothing can be skipped.
pub(crate) fn blank_irrelevant_bodies(source: &str, file: &FileWords<'_>, possible: &RuleSelection) -> Option<Blanked> {
    let Decision { candidates, lone_strings, assignments } = decide(source, file, possible)?;
    // What is left out, in source order: skipped bodies and definitions, and the lone
    // strings outside them.
    let mut left_out: Vec<LeftOut> = candidates
        .iter()
        .filter(|c| c.kept.is_none())
        .map(|c| {
            let (zero, kind) = if c.whole { (c.body.outer_start, Stand::Definition) } else { (c.body.first_statement, Stand::Body) };
            LeftOut { range: zero..c.body.range.end, zero, kind }
        })
        .collect();
    let mut strings = Vec::new();
    let mut next = 0;
    // Strings and assignments never overlap each other.
    let mut extras: Vec<(Range<usize>, Stand)> = lone_strings.into_iter().map(|r| (r, Stand::String)).collect();
    extras.extend(assignments.into_iter().map(|r| (r, Stand::Statement)));
    extras.sort_by_key(|(r, _)| r.start);
    for (range, kind) in extras {
        while next < left_out.len() && left_out[next].range.end <= range.start {
            next += 1;
        }
        if next < left_out.len() && left_out[next].range.start <= range.start {
            continue; // inside what is left out already
        }
        strings.push(LeftOut { zero: range.start, range, kind });
    }
    left_out.extend(strings);
    left_out.sort_by_key(|l| l.range.start);
    if left_out.is_empty() {
        return None;
    }
    let mut bytes = source.as_bytes().to_vec();
    let mut included = Vec::new();
    let mut start = 0;
    for l in &left_out {
        // The piece becomes a `0` statement; the rest of a multi-byte character, left
        // out of parsing anyway, becomes spaces so the text stays UTF-8.
        bytes[l.zero] = b'0';
        for b in bytes[l.zero + 1..].iter_mut().take_while(|b| (0x80..0xC0).contains(*b)) {
            *b = b' ';
        }
        included.push(start..l.zero + 1);
        start = l.range.end;
    }
    let bodies = left_out;
    included.push(start..source.len());
    let source = String::from_utf8(bytes).ok()?;
    Some(Blanked { source, bodies, included })
}

/// What `frozen-network-tracks-grad` needs to know to skip bodies: the words that can
/// construct a pretrained network (`from_pretrained`, `torchvision`, `timm`, `hub`, and
/// every name an import of those binds).
struct PretrainedNetworks<'a> {
    words: FxHashSet<&'a str>,
}

impl<'a> PretrainedNetworks<'a> {
    const MODULES: [&'static str; 4] = ["from_pretrained", "torchvision", "timm", "hub"];

    /// `None` when code outside function bodies (other than imports) could construct a
    /// network: its uses anywhere in the module would then matter.
    fn find(source: &'a str, outline: &crate::outline::Outline<'a>) -> Option<Self> {
        let mut words: FxHashSet<&str> = Self::MODULES.into_iter().collect();
        for import in &outline.imports {
            // `from torchvision.models import resnet50 as r`: any name in it may be bound
            // to (or lead to) a constructor. `huggingface_hub` is not `hub`.
            let names = Words::scan_except(&source[import.clone()], import.start, &[]).identifiers;
            if Self::MODULES.iter().any(|m| names.contains(m)) {
                words.extend(names.into_iter().filter(|w| !matches!(*w, "from" | "import" | "as")));
            }
        }
        // Module and class level, imports and docstrings and comments aside.
        let merged = crate::merge_ranges(outline.quiet.iter().chain(&outline.imports).cloned());
        let mut start = 0;
        for end in outline.bodies.iter().map(|b| b.range.clone()).chain(std::iter::once(source.len()..source.len())) {
            let gap = Words::scan_except(&source[start..end.start], start, &merged);
            if gap.identifiers.iter().any(|w| words.contains(w)) {
                return None;
            }
            start = end.end;
        }
        Some(PretrainedNetworks { words })
    }

    fn constructs(&self, body: &Words<'_>) -> bool {
        body.identifiers.iter().any(|w| self.words.contains(w))
    }

    /// Could the body construct a network, or call `backward()` / `grad()` (the rule
    /// needs one somewhere in the module)?
    fn constructs_or_trains(&self, body: &Words<'_>) -> bool {
        self.constructs(body) || body.mentions_backward()
    }
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
    blanked.bodies.iter().all(|left_out| {
        let Some(zero) = root.descendant_for_byte_range(left_out.zero, left_out.zero + 1) else { return false };
        let statement = zero.parent().filter(|s| zero.kind() == "integer" && s.kind() == "expression_statement");
        let Some(container) = statement.and_then(|s| s.parent()) else { return false };
        match left_out.kind {
            Stand::Body => {
                let mut cursor = container.walk();
                let statements = container.named_children(&mut cursor).filter(|c| c.kind() != "comment").count();
                container.kind() == "block"
                    && statements == 1
                    && container.parent().map(|f| f.kind() == "function_definition").unwrap_or(false)
            }
            Stand::Definition => {
                container.kind() == "module"
                    || (container.kind() == "block" && container.parent().map(|c| c.kind() == "class_definition").unwrap_or(false))
            }
            Stand::String => container.kind() == "block",
            Stand::Statement => matches!(container.kind(), "block" | "module"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::blank_irrelevant_bodies;
    use crate::prefilter::{possible_rules, FileWords};
    use crate::RuleSelection;

    /// The names of the functions whose bodies are blanked.
    fn blanked(source: &str) -> Vec<String> {
        let words = FileWords::scan(source);
        let possible = possible_rules(source, &words, &RuleSelection::all());
        let Some(b) = blank_irrelevant_bodies(source, &words, &possible) else { return Vec::new() };
        assert_eq!(b.source.len(), source.len());
        let tree = b.parse().expect("ranges are sorted");
        assert!(super::parsed_as_blanked(&tree, &b), "{}", tree.root_node().to_sexp());
        let mut names = Vec::new();
        for left_out in b.bodies.iter().filter(|l| matches!(l.kind, super::Stand::Body | super::Stand::Definition)) {
            let def = match left_out.kind {
                super::Stand::Definition => left_out.range.start + source[left_out.range.start..].find("def ").unwrap(),
                _ => source[..left_out.range.start].rfind("def ").unwrap(),
            };
            let whole = if left_out.kind == super::Stand::Definition { "whole " } else { "" };
            names.push(format!("{whole}{}", source[def + 4..].split('(').next().unwrap()));
        }
        names
    }

    const EVAL: &str = "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n    for x in loader:\n        model(x)\n";

    #[test]
    fn bodies_no_rule_can_fire_in_are_blanked() {
        let source = format!("{EVAL}\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = torch.nn.Linear(2, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n");
        assert_eq!(blanked(&source), ["whole __init__", "whole forward"]);
    }

    #[test]
    fn a_caller_of_a_kept_function_is_kept() {
        let source = format!("{EVAL}\ndef main(model, loader):\n    with torch.no_grad():\n        evaluate(model, loader)\n\ndef unrelated():\n    return 1\n");
        assert_eq!(blanked(&source), ["whole unrelated"]);
    }

    #[test]
    fn callers_do_not_matter_where_nothing_disables_gradients() {
        // `evaluate` runs with gradients whoever calls it: `main` can go.
        let source = format!("{EVAL}\ndef main(model, loader):\n    evaluate(model, loader)\n");
        assert_eq!(blanked(&source), ["whole main"]);
    }

    #[test]
    fn callers_matter_when_some_caller_may_disable_gradients() {
        // `evaluate` is only called under `no_grad` if `run`'s caller is too.
        let source = format!("{EVAL}\ndef run(model, loader):\n    evaluate(model, loader)\n\n@torch.no_grad()\ndef main(model, loader):\n    run(model, loader)\n\ndef other(model, loader):\n    run(model, loader)\n\ndef unrelated():\n    return 1\n");
        assert_eq!(blanked(&source), ["whole unrelated"]);
    }

    #[test]
    fn forward_calling_an_evaluation_function_is_kept() {
        // A function named for evaluation that `forward` calls is a step of training.
        let source = "import torch\n\nclass M(torch.nn.Module):\n    def predict(self, x):\n        return self.head(x)\n\n    def forward(self, x):\n        return self.predict(x)\n\n    def other(self, x):\n        return self.predict(x)\n";
        assert_eq!(blanked(source), ["whole other"]);
    }

    #[test]
    fn a_method_assigning_an_attribute_kept_code_reads_is_kept() {
        let source = "import torch\n\nclass Runner:\n    def setup(self):\n        self.net = torch.nn.Linear(2, 2)\n        self.other = 1\n\n    def predict(self, x):\n        return self.net(x)\n\n    def helper(self):\n        return self.other\n";
        assert_eq!(blanked(source), ["whole helper"]);
    }

    #[test]
    fn a_class_defined_in_a_body_and_named_elsewhere_is_kept() {
        let source = "import torch\n\ndef make():\n    class Head(torch.nn.Module):\n        pass\n    return Head\n\ndef predict(x):\n    return Head()(x)\n";
        assert_eq!(blanked(source), Vec::<String>::new());
    }

    #[test]
    fn a_function_named_elsewhere_keeps_its_header() {
        // `helper` stays bound (a name with no binding would be read by what it says).
        let source = format!("{EVAL}\n@decorate\ndef helper(x):\n    return x\n\ndef unused(x=1):\n    return x\n\nregister(helper)\n");
        assert_eq!(blanked(&source), ["helper", "whole unused"]);
    }

    #[test]
    fn a_method_used_only_as_an_attribute_goes_whole() {
        // `self.scale` is an attribute: no binding of `scale` is ever looked up.
        let source = format!("{EVAL}\nclass M:\n    def scale(self, x):\n        return x * 2\n\n    def other(self, x):\n        return self.scale\n");
        assert_eq!(blanked(&source), ["whole scale", "whole other"]);
    }

    #[test]
    fn a_header_calling_a_function_that_matters_stays() {
        let source = format!("{EVAL}\ndef f(x=evaluate(None, [])):\n    return x\n");
        assert_eq!(blanked(&source), ["f"]);
    }

    /// The assignments left out of `source`.
    fn assignments_left_out(source: &str) -> Vec<&str> {
        let words = FileWords::scan(source);
        let possible = possible_rules(source, &words, &RuleSelection::all());
        let b = blank_irrelevant_bodies(source, &words, &possible).unwrap();
        assert!(super::parsed_as_blanked(&b.parse().unwrap(), &b));
        b.bodies.iter().filter(|l| l.kind == super::Stand::Statement).map(|l| &source[l.range.clone()]).collect()
    }

    #[test]
    fn assignments_nothing_kept_names_are_left_out() {
        let source = format!("TABLE = {{\n    'a': 1,\n}}\nLIMIT = 3\nkeys = [k for k in TABLE]\n{EVAL}\nclass C:\n    size: int = 2\n    name = 'c'\n    t = (LIMIT, x.y)\n\ndef f():\n    return TABLE\n\nf.attr = 1\n");
        // `TABLE` is used by `keys` (kept: a comprehension binds `k`), `LIMIT` by `t`
        // (left out, so `LIMIT` can go too).
        assert_eq!(assignments_left_out(&source), ["LIMIT = 3", "size: int = 2", "name = 'c'", "t = (LIMIT, x.y)"]);
    }

    #[test]
    fn an_assignment_kept_code_reads_stays() {
        let source = format!("scale = 2\nmodel_name = 'm'\n{EVAL}\ndef evaluate2(model, loader):\n    model.eval()\n    for x in loader:\n        model(x * scale)\n");
        assert_eq!(assignments_left_out(&source), ["model_name = 'm'"]);
    }

    #[test]
    fn docstrings_at_outline_level_are_left_out() {
        let source = "\"\"\"Module docstring.\"\"\"\nimport torch\n\nclass A:\n    '''Class\n    docstring.'''\n\n    def evaluate(self, model, loader):\n        \"\"\"Method docstring.\"\"\"\n        model.eval()\n        for x in loader:\n            'not at the first level'\n            model(x)\n";
        let words = FileWords::scan(source);
        let possible = possible_rules(source, &words, &RuleSelection::all());
        let b = blank_irrelevant_bodies(source, &words, &possible).unwrap();
        let strings: Vec<&str> = b.bodies.iter().filter(|l| l.kind == super::Stand::String).map(|l| &source[l.range.clone()]).collect();
        assert_eq!(strings, ["'''Class\n    docstring.'''", "\"\"\"Method docstring.\"\"\""]);
        assert!(super::parsed_as_blanked(&b.parse().unwrap(), &b));
    }

    #[test]
    fn suppression_comments_keep_a_body() {
        let source = format!("{EVAL}\ndef f():\n    x = 1  # memlint: skip-file\n    return x\n");
        assert_eq!(blanked(&source), Vec::<String>::new());
    }

    #[test]
    fn every_use_of_a_pretrained_network_attribute_is_kept() {
        // frozen-network-tracks-grad follows `self.vgg` through the class: a method that
        // hands it to an optimizer decides that it is trained.
        let source = "import torch\nimport torchvision\n\nclass Loss(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.vgg = torchvision.models.vgg16(weights='DEFAULT')\n\n    def forward(self, x):\n        return self.vgg(x).mean()\n\n    def optimizers(self):\n        return torch.optim.Adam(self.vgg.parameters())\n\n    def f(self):\n        return 1\n\ndef train(loss, x):\n    loss(x).backward()\n";
        assert_eq!(blanked(source), ["whole f"]);
    }

    #[test]
    fn names_imported_from_torchvision_count_as_constructors() {
        let source = "import torch\nfrom torchvision.models import vgg16 as make\nfrom huggingface_hub import upload\n\ndef build():\n    return make(weights='DEFAULT')\n\ndef publish():\n    upload()\n\ndef train(net, x):\n    net(x).sum().backward()\n";
        assert_eq!(blanked(source), ["whole publish"]);
    }

    #[test]
    fn a_network_built_outside_functions_disables_skipping() {
        let source = format!("{EVAL}\nimport torchvision\nnet = torchvision.models.vgg16(weights='DEFAULT')\n\ndef train(x):\n    net(x).sum().backward()\n\ndef f():\n    return 1\n");
        assert_eq!(blanked(&source), Vec::<String>::new());
    }

    #[test]
    fn a_body_scaling_the_loss_is_kept_for_half_without_grad_scaler() {
        let source = "import torch\n\ndef train(model, x):\n    model.half()\n    model(x).sum().backward()\n\ndef make():\n    return torch.amp.GradScaler()\n\ndef f():\n    return 1\n";
        assert_eq!(blanked(source), ["whole f"]);
    }

    #[test]
    fn an_import_alias_of_a_trigger_word_counts() {
        let source = "from torch.cuda import empty_cache as ec\n\ndef step(model, loader):\n    for x in loader:\n        ec()\n\ndef f():\n    return 1\n";
        assert_eq!(blanked(source), ["whole f"]);
    }
}

