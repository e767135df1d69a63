//! Runs the enabled rules over one module: each rule's query finds candidates, the rule
//! decides with the semantic model.

use std::ops::Range;
use std::sync::OnceLock;

use memlint_python::tree_sitter::{Node, Query, QueryCursor, Tree};
use memlint_python::SemanticModel;
use streaming_iterator::StreamingIterator;

use crate::noqa::Directives;
use crate::{Diagnostic, LinterSettings, Rule, RuleSelection};

/// A rule's own query, compiled once per process, at the first candidate of a lint that
/// the rule's screen lets through (see [`Checker::matches_in`]).
///
/// Compiling is nearly all tree-sitter's analysis of each pattern against the grammar
/// (some 13 M instructions a pattern here). Every rule's patterns compiled as one query
/// cost less to compile (267 M instructions against 341 M for every rule's query alone,
/// on torchtune) but more to match: the cursor steps every pattern that starts at a
/// node kind through each candidate of that kind, the patterns of the rules not running
/// included (a `call` starts 13 patterns of 11 rules), and torchtune's check spent 183 M
/// instructions in `ts_query_cursor_next_match` against 77 M with each rule's own query.
fn rule_query(rule: Rule) -> &'static Query {
    static QUERIES: [OnceLock<Query>; Rule::ALL.len()] = [const { OnceLock::new() }; Rule::ALL.len()];
    QUERIES[rule_index(rule)].get_or_init(|| {
        // Each query compiles alone (tests/queries.rs): a failure here is a build defect.
        Query::new(&memlint_python::language(), rule.query_source()).unwrap_or_else(|e| panic!("the query of {} does not compile: {e}", rule.name()))
    })
}

/// The text of each pattern of `rule`'s query, in order: from its first byte to the next
/// pattern's (the comments before that one included) or the end of the query. Read from
/// the text, not the compiled query: what a rule's root kinds and screen need is known
/// before its query is compiled, and a query none of whose patterns can start at a node
/// of the file is never compiled.
fn pattern_texts(rule: Rule) -> impl Iterator<Item = &'static str> {
    let source = rule.query_source();
    let starts = pattern_starts(source);
    (0..starts.len()).map(move |i| &source[starts[i]..starts.get(i + 1).copied().unwrap_or(source.len())])
}

/// Where each top-level pattern of the query text `source` starts: each `(` or `[` (a
/// node or an alternation) outside every other one, and outside comments and strings.
/// What the compiled query's `start_byte_for_pattern` gives for the queries here (a test
/// compares the two for every rule's query).
fn pattern_starts(source: &str) -> Vec<usize> {
    let bytes = source.as_bytes();
    let mut starts = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b';' => {
                i = comment_end(bytes, i);
                continue;
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' => {
                if depth == 0 {
                    starts.push(i);
                }
                depth += 1;
            }
            b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    starts
}

/// Where the query comment starting at `at` (a `;`) ends: at its line's end.
fn comment_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |n| at + n)
}

/// The node kinds (by kind id) at which the patterns of a rule's query start, when every
/// pattern starts with a named node kind: `(call ...)`, `(assignment ...)`. `None` when one
/// starts otherwise (an alternation, a wildcard), and the query must walk its regions.
///
/// Read from the query's own text, so the checker knows no rule: with it, a query runs
/// only at the nodes where one of its patterns can start (see [`Checker::matches_in`]).
fn root_kinds(rule: Rule) -> Option<&'static [bool]> {
    static ROOTS: [OnceLock<Option<Vec<bool>>>; Rule::ALL.len()] = [const { OnceLock::new() }; Rule::ALL.len()];
    ROOTS[rule_index(rule)]
        .get_or_init(|| {
            let mut kinds = vec![false; memlint_python::language().node_kind_count()];
            for pattern in pattern_texts(rule) {
                let mut found = false;
                for id in named_kind_ids(pattern_root_kind(pattern)?) {
                    kinds[id as usize] = true;
                    found = true;
                }
                if !found {
                    return None;
                }
            }
            Some(kinds)
        })
        .as_deref()
}

/// The ids of the named node kinds called `name`: every one, as aliased symbols share a name.
fn named_kind_ids(name: &str) -> impl Iterator<Item = u16> + '_ {
    let language = memlint_python::language();
    (0..language.node_kind_count() as u16).filter(move |id| language.node_kind_is_named(*id) && language.node_kind_for_id(*id) == Some(name))
}

/// The node kind a pattern (its text from its first byte) starts with: `(call ...)` →
/// `call`; `None` for an alternation, a wildcard or an anonymous node.
fn pattern_root_kind(pattern: &str) -> Option<&str> {
    let name = pattern.trim_start().strip_prefix('(')?.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next()?;
    (!name.is_empty() && name != "_").then_some(name)
}

/// What a node's text must hold for a query's pattern to match there: for each node kind
/// (by id), the patterns that can start at it, each as the literals every match of it
/// holds. A literal is an anonymous node of the pattern (`"+="`) or a string a capture
/// must equal (`(#eq? @method "append")`), or one of several (`(#any-of? @m "append"
/// "extend")`); not one in an alternation, under a `?` or `*`, or in any other predicate.
/// All of them lie in the text of the node a match starts at, so a candidate whose text
/// lacks a literal of every pattern that could start there cannot match: the query cursor
/// is not run at it (most calls hold no `append`).
///
/// Read from the query's text, like [`root_kinds`]: the checker knows no rule.
struct LiteralScreen {
    /// For each kind, each pattern's literals: groups that must each have one of theirs.
    by_kind: Vec<Vec<Vec<Vec<String>>>>,
}

impl LiteralScreen {
    /// The screen of the patterns `texts`; `None` when one does not start with a named
    /// node kind (such queries walk their regions).
    fn of<'s>(texts: impl IntoIterator<Item = &'s str>) -> Option<LiteralScreen> {
        let mut by_kind = vec![Vec::new(); memlint_python::language().node_kind_count()];
        for text in texts {
            let literals = pattern_literals(text);
            for id in named_kind_ids(pattern_root_kind(text)?) {
                by_kind[id as usize].push(literals.clone());
            }
        }
        Some(LiteralScreen { by_kind })
    }

    /// Could a pattern match starting at `node` (of kind `kind`), whose text is `text`?
    fn may_match(&self, kind: u16, text: &[u8]) -> bool {
        self.by_kind.get(kind as usize).is_some_and(|patterns| {
            patterns.iter().any(|groups| groups.iter().all(|group| group.iter().any(|l| memchr::memmem::find(text, l.as_bytes()).is_some())))
        })
    }
}

/// The literals every match of the pattern `text` holds (see [`LiteralScreen`]), as groups
/// of which each match holds one literal at least: a small reader of the query syntax that
/// keeps a literal only where it is certain. A predicate's literal counts only when its
/// capture is always there: not captured under `?` or `*` or in an alternation (a
/// predicate over a capture with no node holds, so its literal may be absent).
fn pattern_literals(text: &str) -> Vec<Vec<String>> {
    /// A group of literals, and the capture a predicate asked it of (`None`: the pattern's
    /// own anonymous node).
    type Group = (Option<String>, Vec<String>);
    enum Frame {
        /// A node or a group: the literals and the captures found in it so far.
        Node(Vec<Group>, Vec<String>),
        /// `[...]`: what is in it is one alternative of several.
        Alternation(Vec<String>),
        /// `(#name? ...)`: its name, and its arguments (`Err(capture)` for a capture).
        Predicate(String, Vec<Result<String, String>>),
    }
    let bytes = text.as_bytes();
    let optional_after = |i: usize| matches!(bytes.get(i), Some(b'?' | b'*'));
    // Captures that may hold no node in a match.
    let mut maybe_absent: Vec<String> = Vec::new();
    let mut stack = vec![Frame::Node(Vec::new(), Vec::new())];
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b';' => i = comment_end(bytes, i),
            b'(' => {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                    i += 1;
                }
                if bytes.get(i) == Some(&b'#') {
                    let name_end = text[i..].find(|c: char| c.is_whitespace() || c == ')').map_or(text.len(), |n| i + n);
                    stack.push(Frame::Predicate(text[i..name_end].to_owned(), Vec::new()));
                    i = name_end;
                } else {
                    stack.push(Frame::Node(Vec::new(), Vec::new()));
                }
            }
            b'[' => {
                stack.push(Frame::Alternation(Vec::new()));
                i += 1;
            }
            b')' | b']' => {
                i += 1;
                let closed = stack.pop();
                if stack.is_empty() {
                    // The top frame closed: unbalanced text.
                    return Vec::new();
                }
                let optional = optional_after(i);
                match closed {
                    Some(Frame::Node(found, captures)) => match stack.last_mut() {
                        Some(Frame::Node(parent, parent_captures)) if !optional => {
                            parent.extend(found);
                            parent_captures.extend(captures);
                        }
                        Some(Frame::Alternation(alternative_captures)) if !optional => alternative_captures.extend(captures),
                        _ => maybe_absent.extend(captures),
                    },
                    Some(Frame::Alternation(captures)) => maybe_absent.extend(captures),
                    Some(Frame::Predicate(name, args)) => {
                        let group = match (name.as_str(), args.as_slice()) {
                            ("#eq?", [Ok(literal), Err(capture)] | [Err(capture), Ok(literal)]) => Some((capture.clone(), vec![literal.clone()])),
                            ("#any-of?", [Err(capture), literals @ ..]) if !literals.is_empty() => {
                                let literals: Option<Vec<String>> = literals.iter().map(|l| l.clone().ok()).collect();
                                literals.filter(|l| l.iter().all(|l| !l.is_empty())).map(|l| (capture.clone(), l))
                            }
                            _ => None,
                        };
                        if let (Some((capture, literals)), Some(Frame::Node(parent, _))) = (group, stack.last_mut()) {
                            parent.push((Some(capture), literals));
                        }
                    }
                    None => {}
                }
            }
            b'"' => {
                let mut literal = String::new();
                let mut certain = true;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        match bytes.get(i + 1) {
                            Some(b'"') => literal.push('"'),
                            Some(b'\\') => literal.push('\\'),
                            _ => certain = false,
                        }
                        i += 2;
                        continue;
                    }
                    let c = text[i..].chars().next().expect("a character at a char boundary");
                    literal.push(c);
                    i += c.len_utf8();
                }
                i += 1;
                match stack.last_mut() {
                    Some(Frame::Node(found, _)) if certain && !literal.is_empty() && !optional_after(i) => found.push((None, vec![literal])),
                    Some(Frame::Predicate(_, args)) => args.push(if certain { Ok(literal) } else { Err(String::new()) }),
                    _ => {}
                }
            }
            b'@' => {
                let name_end = text[i + 1..].find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))).map_or(text.len(), |n| i + 1 + n);
                let name = text[i + 1..name_end].to_owned();
                // `(x)? @c`: the capture of a node that may be absent.
                let after_quantifier = matches!(text[..i].trim_end().as_bytes().last(), Some(b'?' | b'*'));
                match stack.last_mut() {
                    Some(Frame::Predicate(_, args)) => args.push(Err(name)),
                    _ if after_quantifier => maybe_absent.push(name),
                    Some(Frame::Node(_, captures) | Frame::Alternation(captures)) => captures.push(name),
                    None => {}
                }
                i = name_end;
            }
            _ => i += 1,
        }
    }
    let Some(Frame::Node(found, captured)) = stack.into_iter().next() else { return Vec::new() };
    found
        .into_iter()
        .filter(|(capture, _)| capture.as_ref().is_none_or(|c| captured.contains(c) && !maybe_absent.contains(c)))
        .map(|(_, literals)| literals)
        .collect()
}

/// The screen of a rule's query, read once per process.
fn rule_screen(rule: Rule) -> Option<&'static LiteralScreen> {
    static SCREENS: [OnceLock<Option<LiteralScreen>>; Rule::ALL.len()] = [const { OnceLock::new() }; Rule::ALL.len()];
    SCREENS[rule_index(rule)].get_or_init(|| LiteralScreen::of(pattern_texts(rule))).as_ref()
}

/// The node kinds (by kind id) where a pattern of some rule of `rules` can start: what the
/// semantic model indexes during its walk (`SemanticModel::indexing`), so that finding a
/// query's candidates takes no walk of its own.
pub(crate) fn query_root_kinds(rules: &RuleSelection) -> Vec<bool> {
    let mut union = vec![false; memlint_python::language().node_kind_count()];
    for kinds in rules.iter().filter_map(root_kinds) {
        for (u, k) in union.iter_mut().zip(kinds) {
            *u |= *k;
        }
    }
    union
}

/// On the process's first lint, a thread of its own compiles the queries that lint will
/// match with (of the rules with a candidate in the file, see [`may_match_in`]) from the
/// last rule back, while the lint compiles them from the first on: the two meet in the
/// middle, and a short run (one file, a few) waits for about half the compiles it would
/// wait for alone, and for none of the queries its files give no candidate.
fn compile_from_the_last_rule(model: &SemanticModel<'_>, rules: &RuleSelection) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let rules: Vec<Rule> = rules.iter().filter(|rule| may_match_in(model, *rule)).collect();
        // Without a thread (none can be made), the lint compiles every query itself.
        let _ = std::thread::Builder::new().name("memlint-queries".into()).spawn(move || {
            for rule in rules.into_iter().rev() {
                rule_query(rule);
            }
        });
    });
}

/// Could `rule`'s query match anywhere in the module: at a node the model indexed, of a
/// kind one of its patterns starts at, that its screen lets through? (A query that walks
/// its regions may match anywhere.)
fn may_match_in(model: &SemanticModel<'_>, rule: Rule) -> bool {
    let Some(kinds) = root_kinds(rule) else { return true };
    let screen = rule_screen(rule);
    let source = model.source().as_bytes();
    model.indexed_nodes().iter().zip(model.indexed_node_kinds()).any(|(node, kind)| {
        kinds.get(*kind as usize).copied().unwrap_or(false) && screen.is_none_or(|screen| screen.may_match(*kind, &source[node.byte_range()]))
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
    /// In the match's order; a few per match, so a list (a map per match showed in
    /// profiles). A name captured twice means its last node, as a map built in order would.
    captures: Vec<(&'static str, Node<'t>)>,
}

impl<'t> QueryMatch<'t> {
    pub fn get(&self, name: &str) -> Option<Node<'t>> {
        self.captures.iter().rev().find(|(n, _)| *n == name).map(|(_, node)| *node)
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
    /// overlapping ranges are merged), in source order. Rules that can only fire in some
    /// regions (loops, evaluation code) ask for those.
    ///
    /// The query runs only at the nodes where one of its patterns can start (one shared
    /// walk found them), matching there and nowhere below: no rule walks a subtree per
    /// candidate. A query whose patterns' starts are not all node kinds walks its regions.
    pub fn matches_in(&self, ranges: &[Range<usize>]) -> Vec<QueryMatch<'t>> {
        let merged = merge_ranges(ranges.iter().cloned());
        let Some(kinds) = root_kinds(self.rule) else { return self.matches_walking(&merged) };
        self.matches_at_roots(&merged, kinds)
    }

    /// The matches of the current rule's query that start within one of `nodes` (the
    /// candidates the semantic model already knows, such as the calls of a name).
    pub fn matches_at(&self, nodes: &[Node<'t>]) -> Vec<QueryMatch<'t>> {
        let ranges: Vec<Range<usize>> = nodes.iter().map(|n| n.byte_range()).collect();
        self.matches_in(&ranges)
    }

    fn matches_at_roots(&self, merged: &[Range<usize>], kinds: &[bool]) -> Vec<QueryMatch<'t>> {
        // Compiled at the first candidate the screen lets through: a rule with none in the
        // file (most files hold no `zero_grad`, no `volatile`) needs no query.
        let mut query: Option<&'static Query> = None;
        let source = self.model.source().as_bytes();
        // Indexed by the model's walk for every rule of this lint.
        let candidates = self.model.indexed_nodes();
        let candidate_kinds = self.model.indexed_node_kinds();
        let mut found = Vec::new();
        let screen = rule_screen(self.rule);
        let mut cursor = QueryCursor::new();
        // A match starts at its pattern's first node: this one, not a descendant.
        cursor.set_max_start_depth(Some(0));
        for range in merged {
            let first = candidates.partition_point(|n| n.start_byte() < range.start);
            let in_range = candidates[first..].iter().zip(&candidate_kinds[first..]).take_while(|(n, _)| n.start_byte() < range.end);
            for (node, kind) in in_range {
                if !kinds.get(*kind as usize).copied().unwrap_or(false) {
                    continue;
                }
                if screen.is_some_and(|screen| !screen.may_match(*kind, &source[node.byte_range()])) {
                    continue;
                }
                let query = *query.get_or_insert_with(|| rule_query(self.rule));
                let names = query.capture_names();
                let mut matches = cursor.matches(query, *node, source);
                while let Some(m) = matches.next() {
                    let starts_inside = m.captures.iter().map(|c| c.node.start_byte()).min().map(|s| s >= range.start && s < range.end).unwrap_or(false);
                    if !starts_inside {
                        continue;
                    }
                    let captures = m.captures.iter().map(|c| (names[c.index as usize], c.node)).collect();
                    found.push(QueryMatch { captures });
                }
            }
        }
        found
    }

    fn matches_walking(&self, merged: &[Range<usize>]) -> Vec<QueryMatch<'t>> {
        let query = rule_query(self.rule);
        let names = query.capture_names();
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

    pub fn text(&self, node: Node<'_>) -> &'t str {
        self.model.text(node)
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

fn rule_index(rule: Rule) -> usize {
    Rule::ALL.iter().position(|r| *r == rule).expect("rule in ALL")
}

/// Runs the enabled rules; `model` indexed the [`query_root_kinds`] of `settings.rules`.
pub(crate) fn run_rules<'t>(model: &SemanticModel<'t>, settings: &LinterSettings) -> Vec<Diagnostic> {
    compile_from_the_last_rule(model, &settings.rules);
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
pub(crate) fn run_rules_after_suppression<'t>(
    model: &SemanticModel<'t>,
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
pub fn in_error_region(tree: &Tree, range: Range<usize>) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The captures of `matches`, as comparable text.
    fn shown(matches: &[QueryMatch<'_>]) -> Vec<String> {
        let mut out: Vec<String> = matches
            .iter()
            .map(|m| {
                let mut captures: Vec<String> = m.captures.iter().map(|(name, node)| format!("{name}@{:?}", node.byte_range())).collect();
                captures.sort();
                captures.join(" ")
            })
            .collect();
        out.sort();
        out
    }

    /// Every named node of `kinds`, by a plain walk of the whole tree in pre-order: what the
    /// model's walk must index.
    fn walk_for_kinds<'t>(tree: &'t Tree, kinds: &[bool]) -> Vec<Node<'t>> {
        let mut nodes = Vec::new();
        let mut cursor = tree.root_node().walk();
        'walk: loop {
            let node = cursor.node();
            if node.is_named() && kinds.get(node.kind_id() as usize).copied().unwrap_or(false) {
                nodes.push(node);
            }
            if cursor.goto_first_child() {
                continue;
            }
            while !cursor.goto_next_sibling() {
                if !cursor.goto_parent() {
                    break 'walk;
                }
            }
        }
        nodes
    }

    /// The text of each pattern of `query`, compiled alone from `source`.
    fn own_pattern_texts<'s>(query: &Query, source: &'s str) -> Vec<&'s str> {
        let starts: Vec<usize> = (0..query.pattern_count()).map(|p| query.start_byte_for_pattern(p)).collect();
        (0..starts.len()).map(|p| &source[starts[p]..starts.get(p + 1).copied().unwrap_or(source.len())]).collect()
    }

    /// The matches that start in `range` of `rule`'s query compiled alone, walking the
    /// range: what a rule found before every query was compiled into one.
    fn own_query_matches<'t>(own: &'static Query, model: &SemanticModel<'t>, range: Range<usize>) -> Vec<QueryMatch<'t>> {
        let names = own.capture_names();
        let mut found = Vec::new();
        let mut cursor = QueryCursor::new();
        cursor.set_byte_range(range.clone());
        let mut matches = cursor.matches(own, model.root(), model.source().as_bytes());
        while let Some(m) = matches.next() {
            let starts_inside = m.captures.iter().map(|c| c.node.start_byte()).min().is_some_and(|s| s >= range.start && s < range.end);
            if starts_inside {
                found.push(QueryMatch { captures: m.captures.iter().map(|c| (names[c.index as usize], c.node)).collect() });
            }
        }
        found
    }

    fn shown_nodes(nodes: &[Node<'_>]) -> Vec<String> {
        nodes.iter().map(|n| format!("{}@{:?}", n.kind(), n.byte_range())).collect()
    }

    /// The model's walk indexes exactly the nodes a walk of the whole tree finds, in the same
    /// order, also in broken code (parameters, bases, imports and error nodes included).
    #[test]
    fn model_indexes_every_candidate() {
        let indexed = query_root_kinds(&RuleSelection::all());
        let all_kinds = vec![true; memlint_python::language().node_kind_count()];
        for source in [
            "import torch as th, os\nfrom a import (b as c, d)\n@dec(f(x))\ndef g(a=h(1), *b: int, **k) -> r(2):\n    return a(b)\nclass C(Base(1), metaclass=M):\n    x = y(z)\n",
            "def f(:\n    g(x)\n)) h(\nclass (:\n  for x in y(: z(1)\n",
            "lambda x=f(1): g(x)\n[q(i) for i in r(3) if s(i)]\n",
        ] {
            let tree = memlint_python::parse_with(source, None);
            for kinds in [&indexed, &all_kinds] {
                let model = SemanticModel::indexing(&tree, source, &memlint_python::NoProject, kinds);
                assert_eq!(shown_nodes(model.indexed_nodes()), shown_nodes(&walk_for_kinds(&tree, kinds)), "{source}");
            }
        }
    }

    #[test]
    fn literals_every_match_holds() {
        let literals = |text: &str| pattern_literals(text).into_iter().map(|group| group.join("|")).collect::<Vec<String>>();
        assert_eq!(literals("(augmented_assignment left: (_) @a operator: \"+=\" right: (_) @t) @s"), ["+="]);
        assert_eq!(literals("(call function: (attribute attribute: (identifier) @m) (#eq? @m \"append\")) @c"), ["append"]);
        assert_eq!(literals("(call (identifier) @m (#eq? \"load\" @m))"), ["load"]);
        // Predicates after the pattern belong to it.
        assert_eq!(literals("(call function: (identifier) @f) @c\n(#eq? @f \"empty_cache\")"), ["empty_cache"]);
        // Alternatives, optional and repeated parts, other predicates: nothing certain.
        assert!(literals("(call function: [(identifier) @f \"x\"] (#eq? @f \"y\"))").is_empty(), "@f holds no node when `x` matches");
        assert!(literals("(call [\"a\" \"b\"])").is_empty());
        assert!(literals("(call \"a\"? (argument_list \"b\")* (keyword_argument \"c\")?)").is_empty());
        assert!(literals("(call (identifier) @f (#match? @f \"^load$\") (#not-eq? @f \"x\") (#not-any-of? @f \"a\" \"b\"))").is_empty());
        assert_eq!(literals("(call (identifier) @f (#any-of? @f \"append\" \"extend\"))"), ["append|extend"]);
        assert!(literals("(call (identifier) @f (#any-of? @f \"append\" @g))").is_empty());
        // A predicate over a capture that may hold no node holds without its literal.
        assert!(literals("(call (argument_list (identifier)? @a) (#eq? @a \"foo\"))").is_empty());
        assert!(literals("(call (argument_list (identifier) @a)* (#eq? @a \"foo\"))").is_empty());
        assert!(literals("(call [(identifier) @a (attribute)] (#eq? @a \"foo\"))").is_empty());
        assert!(literals("(call (#eq? @undefined \"foo\"))").is_empty());
        assert_eq!(literals("(call (argument_list (identifier) @a)+ (#eq? @a \"foo\"))"), ["foo"]);
        assert!(literals("(assignment left: (identifier) @a right: (identifier) @b (#eq? @a @b))").is_empty());
        // A group repeated once or more holds its literals.
        assert_eq!(literals("(block (expression_statement \"x\")+)"), ["x"]);
        // Escapes, and comments (whose quotes are not literals).
        assert_eq!(literals("; a \"comment\"\n(string \"\\\"\")"), ["\""]);
        assert!(literals("(string \"\\n\")").is_empty());
    }

    /// A node whose text lacks a literal of every pattern that could start at it is
    /// screened out; one that holds them all is not.
    #[test]
    fn the_screen_of_a_query() {
        let source = "(call function: (attribute attribute: (identifier) @m) (#eq? @m \"append\")) @c\n(augmented_assignment operator: \"+=\") @s\n";
        let query = Query::new(&memlint_python::language(), source).expect("compiles");
        let screen = LiteralScreen::of(own_pattern_texts(&query, source)).expect("every pattern starts with a kind");
        let kind = |name: &str| memlint_python::language().id_for_node_kind(name, true);
        assert!(screen.may_match(kind("call"), b"xs.append(x)"));
        assert!(!screen.may_match(kind("call"), b"xs.extend(x) += 1"));
        assert!(screen.may_match(kind("augmented_assignment"), b"t += 1"));
        assert!(!screen.may_match(kind("augmented_assignment"), b"t -= xs.append"));
        assert!(!screen.may_match(kind("assignment"), b"xs.append(x) += 1"), "no pattern starts at an assignment");
    }

    /// Every rule's query has a screen, and what it keeps of each pattern is printed
    /// (`cargo test -p memlint_linter the_screens_of_the_rules -- --nocapture`).
    #[test]
    fn the_screens_of_the_rules() {
        for rule in Rule::ALL.iter().copied() {
            assert!(rule_screen(rule).is_some(), "{}", rule.name());
            for (pattern, text) in pattern_texts(rule).enumerate() {
                println!("{} pattern {pattern}: {:?}", rule.name(), pattern_literals(text));
            }
        }
    }

    /// Matching only at the nodes where a pattern can start finds exactly what walking the
    /// regions finds, and what the rule's own query compiled alone finds walking them, for
    /// every rule, on every fixture and example, over the whole module and over each
    /// function.
    #[test]
    fn matching_at_roots_equals_walking() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let mut files: Vec<std::path::PathBuf> = Vec::new();
        for dir in ["crates/memlint_linter/tests/fixtures", "tests/examples"] {
            for entry in std::fs::read_dir(format!("{root}/{dir}")).expect("fixture directory") {
                let path = entry.expect("entry").path();
                if path.extension().is_some_and(|e| e == "py") {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 10, "fixtures found: {}", files.len());
        let all = RuleSelection::all();
        // Leaked, as the checker's query is kept for the process: matches name captures by it.
        let own: Vec<&'static Query> =
            Rule::ALL.iter().map(|r| &*Box::leak(Box::new(Query::new(&memlint_python::language(), r.query_source()).expect("compiles")))).collect();
        let mut compared = 0;
        for path in files {
            let source = std::fs::read_to_string(&path).expect("fixture text");
            let tree = memlint_python::parse_with(&source, None);
            let indexed = query_root_kinds(&all);
            let model = SemanticModel::indexing(&tree, &source, &memlint_python::NoProject, &indexed);
            assert_eq!(shown_nodes(model.indexed_nodes()), shown_nodes(&walk_for_kinds(&tree, &indexed)), "indexed nodes of {}", path.display());
            for rule in Rule::ALL.iter().copied() {
                let kinds = root_kinds(rule).unwrap_or_else(|| panic!("{}: every pattern starts with a node kind", rule.name()));
                let checker = Checker { model: &model, rule, diagnostics: Vec::new() };
                let mut regions = vec![0..source.len()];
                regions.extend(model.functions().map(|f| f.node.byte_range()));
                for region in regions {
                    let merged = merge_ranges([region]);
                    let at_roots = shown(&checker.matches_at_roots(&merged, kinds));
                    let walking = shown(&checker.matches_walking(&merged));
                    assert_eq!(at_roots, walking, "{} on {}", rule.name(), path.display());
                    let alone = shown(&own_query_matches(own[rule_index(rule)], &model, merged[0].clone()));
                    assert_eq!(at_roots, alone, "{} on {}: its own query", rule.name(), path.display());
                    compared += at_roots.len();
                }
            }
        }
        assert!(compared > 100, "matches compared: {compared}");
    }

    /// The patterns read from a query's text start where the compiled query says they do,
    /// for every rule's query and for texts with brackets in comments and strings.
    #[test]
    fn pattern_starts_read_from_the_text_are_the_compiled_querys() {
        let crafted = [
            "; (not a pattern) [nor this]\n(call) @c\n\n; \"(\"\n[(true) (false)] @b\n",
            "((identifier) @c (#eq? @c \"[\\\"(\")) (argument_list \")\" @p) @a\n(call\n  function: (identifier) @f)\n",
        ];
        let texts = Rule::ALL.iter().map(|r| r.query_source()).chain(crafted);
        let mut compared = 0;
        for text in texts {
            let query = Query::new(&memlint_python::language(), text).unwrap_or_else(|e| panic!("{text:?} compiles: {e}"));
            let compiled: Vec<usize> = (0..query.pattern_count()).map(|p| query.start_byte_for_pattern(p)).collect();
            assert_eq!(pattern_starts(text), compiled, "{text:?}");
            compared += compiled.len();
        }
        assert!(compared > Rule::ALL.len(), "patterns compared: {compared}");
    }

    /// A rule's query may match in a module only where a node of a kind it starts at holds
    /// its literals: a module with no `zero_grad` call gives `zero-grad-keeps-memory` none
    /// (its query is then never compiled).
    #[test]
    fn a_query_may_match_only_where_its_screen_lets_a_node_through() {
        let all = RuleSelection::all();
        let may_match = |source: &str| {
            let tree = memlint_python::parse_with(source, None);
            let indexed = query_root_kinds(&all);
            let model = SemanticModel::indexing(&tree, source, &memlint_python::NoProject, &indexed);
            may_match_in(&model, Rule::ZeroGradKeepsMemory)
        };
        assert!(may_match("opt.zero_grad(set_to_none=False)\n"));
        assert!(!may_match("opt.step()\nzero_grad = 1\n"));
        assert!(!may_match("x = 1\n"));
    }

    #[test]
    fn pattern_roots() {
        assert_eq!(pattern_root_kind("(call\n  function: (identifier)) @c"), Some("call"));
        assert_eq!(pattern_root_kind("  (augmented_assignment left: (_) @a)"), Some("augmented_assignment"));
        assert_eq!(pattern_root_kind("[(call) (assignment)] @x"), None);
        assert_eq!(pattern_root_kind("(_) @any"), None);
        assert_eq!(pattern_root_kind("\"+=\" @op"), None);
    }
}
