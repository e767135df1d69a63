//! Runs the enabled rules over one module: each rule's query finds candidates, the rule
//! decides with the semantic model.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use memlint_python::tree_sitter::{Node, Query, QueryCursor, Tree};
use memlint_python::SemanticModel;
use streaming_iterator::StreamingIterator;

use crate::noqa::Directives;
use crate::{Diagnostic, LinterSettings, Rule, RuleSelection};

/// The compiled query of a rule: compiled once per process, when a rule first needs it
/// (compiling all of them up front kept one thread busy while the others waited).
pub fn query(rule: Rule) -> &'static Query {
    static QUERIES: [OnceLock<Query>; Rule::ALL.len()] = [const { OnceLock::new() }; Rule::ALL.len()];
    let index = Rule::ALL.iter().position(|r| *r == rule).expect("rule in ALL");
    QUERIES[index].get_or_init(|| {
        Query::new(&memlint_python::language(), rule.query_source()).unwrap_or_else(|e| {
            // The query test compiles every query, so this is a build defect.
            panic!("query for {} does not compile: {e}", rule.name())
        })
    })
}

/// `ranges` sorted, with overlapping or touching ones merged and empty ones dropped.
fn merge_ranges(ranges: impl IntoIterator<Item = Range<usize>>) -> Vec<Range<usize>> {
    let mut sorted: Vec<Range<usize>> = ranges.into_iter().filter(|r| r.start < r.end).collect();
    sorted.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// One match of a rule's query: its captures by name.
pub struct QueryMatch<'t> {
    captures: HashMap<&'static str, Node<'t>>,
}

impl<'t> QueryMatch<'t> {
    pub fn get(&self, name: &str) -> Option<Node<'t>> {
        self.captures.get(name).copied()
    }
}

/// What a rule sees while it checks a module.
pub struct Checker<'a, 't> {
    pub model: &'a SemanticModel<'t>,
    pub rule: Rule,
    diagnostics: Vec<Diagnostic>,
}

impl<'a, 't> Checker<'a, 't> {
    /// The matches of the current rule's query, in source order.
    pub fn matches(&self) -> Vec<QueryMatch<'t>> {
        self.matches_in(&[0..self.model.source().len()])
    }

    /// The matches of the current rule's query that start within `ranges` (byte ranges;
    /// overlapping ranges are merged). Running a query costs about twice a parse, so
    /// rules that can only fire in some regions (loops, evaluation code) ask for those.
    pub fn matches_in(&self, ranges: &[Range<usize>]) -> Vec<QueryMatch<'t>> {
        let query = query(self.rule);
        let names = query.capture_names();
        let merged = merge_ranges(ranges.iter().cloned());
        let source = self.model.source().as_bytes();
        let mut found = Vec::new();
        let mut cursor = QueryCursor::new();
        for range in merged {
            cursor.set_byte_range(range.clone());
            let mut matches = cursor.matches(query, self.model.root(), source);
            while let Some(m) = matches.next() {
                // The cursor also returns matches that merely overlap the range.
                let starts_inside = m.captures.iter().map(|c| c.node.start_byte()).min().map(|s| s >= range.start && s < range.end).unwrap_or(false);
                if !starts_inside {
                    continue;
                }
                let captures = m.captures.iter().map(|c| (names[c.index as usize], c.node)).collect();
                found.push(QueryMatch { captures });
            }
        }
        found
    }

    /// The matches of the current rule's query that start within one of `nodes` (the
    /// candidates the semantic model already knows, such as the calls of a name): the
    /// query runs there only, not over the whole module.
    pub fn matches_at(&self, nodes: &[Node<'t>]) -> Vec<QueryMatch<'t>> {
        let ranges: Vec<Range<usize>> = nodes.iter().map(|n| n.byte_range()).collect();
        self.matches_in(&ranges)
    }

    pub fn text(&self, node: Node<'_>) -> &'t str {
        self.model.text(node)
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

pub(crate) fn run_rules(model: &SemanticModel<'_>, settings: &LinterSettings) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for rule in settings.rules.iter() {
        let mut checker = Checker { model, rule, diagnostics: Vec::new() };
        rule.check(&mut checker);
        diagnostics.append(&mut checker.diagnostics);
    }
    diagnostics
}

/// What suppression did in one module: what rules that check suppression comments
/// receive, after every other rule's findings were suppressed.
pub struct Suppressions<'a> {
    /// The module's suppression comments.
    pub directives: &'a Directives,
    /// For each directive (same index), the rules whose findings it suppressed.
    pub used: &'a [Vec<Rule>],
    /// The rules the settings enable, before the pre-filter narrowed them: a rule that is
    /// enabled but whose trigger does not hold ran and found nothing.
    pub enabled: &'a RuleSelection,
}

/// Runs the enabled rules that check suppression comments (see
/// [`Rule::observes_suppressions`]).
pub(crate) fn run_rules_after_suppression(
    model: &SemanticModel<'_>,
    settings: &LinterSettings,
    suppressions: &Suppressions<'_>,
) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for rule in settings.rules.iter().filter(|r| r.observes_suppressions()) {
        let mut checker = Checker { model, rule, diagnostics: Vec::new() };
        rule.check_after_suppression(&mut checker, suppressions);
        diagnostics.append(&mut checker.diagnostics);
    }
    diagnostics
}

/// Is `range` in code a syntax error may have mangled? Such findings are dropped so an
/// error never produces a false finding: the enclosing function (or, at module level,
/// the statement and the one before it) must parse cleanly.
pub(crate) fn in_error_region(tree: &Tree, range: Range<usize>) -> bool {
    let root = tree.root_node();
    let Some(mut node) = root.descendant_for_byte_range(range.start, range.end.max(range.start)) else {
        return true;
    };
    loop {
        if node.has_error() {
            return true;
        }
        let Some(parent) = node.parent() else { return false };
        if node.kind() == "function_definition" {
            return false;
        }
        if parent.id() == root.id() {
            // A top-level statement: a broken statement right before it (a `with` whose
            // header failed to parse, say) may have been meant to contain it.
            return node.prev_sibling().map(|p| p.has_error()).unwrap_or(false);
        }
        node = parent;
    }
}
