//! Suppression comments: `# noqa`, `# noqa: MEM001,MEM004`, `# memlint: ignore[MEM001]`
//! on the reported line, and `# memlint: skip-file` anywhere.

use std::collections::HashMap;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use memlint_python::tree_sitter::Tree;
use memlint_python::LineIndex;

use crate::Rule;

/// What a line's comment suppresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Suppression {
    All,
    Rules(Vec<Rule>),
}

/// The suppression comments of one module.
#[derive(Debug, Clone, Default)]
pub struct Directives {
    /// By 0-based line.
    pub lines: HashMap<usize, Suppression>,
    pub skip_file: bool,
}

impl Directives {
    pub fn from_tree(tree: &Tree, source: &str) -> Self {
        static WORDS: OnceLock<AhoCorasick> = OnceLock::new();
        let words = WORDS.get_or_init(|| {
            AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(["noqa", "memlint:"])
                .expect("two plain words build an automaton")
        });
        let mut directives = Directives::default();
        let mut index = None;
        let mut last_comment = usize::MAX;
        // Only comments that mention a directive matter: find the words, then ask the
        // tree whether each one is inside a comment (not a string).
        for found in words.find_iter(source) {
            let Some(node) = tree.root_node().descendant_for_byte_range(found.start(), found.end()) else { continue };
            if node.kind() != "comment" || node.start_byte() == last_comment {
                continue;
            }
            last_comment = node.start_byte();
            let index = index.get_or_insert_with(|| LineIndex::new(source));
            directives.add_comment(index.line_of(node.start_byte()), &source[node.byte_range()]);
        }
        directives
    }

    fn add_comment(&mut self, line: usize, comment: &str) {
        // A comment may hold several directives: `# type: ignore  # noqa: MEM001`.
        for part in comment.split('#').map(str::trim).filter(|p| !p.is_empty()) {
            let lower = part.to_ascii_lowercase();
            if let Some(rest) = lower.strip_prefix("memlint:") {
                let rest = rest.trim();
                if rest == "skip-file" {
                    self.skip_file = true;
                } else if let Some(list) = rest.strip_prefix("ignore") {
                    let list = list.trim();
                    match list.strip_prefix('[').and_then(|l| l.split_once(']')) {
                        Some((codes, _)) => self.add(line, parse_codes(codes)),
                        None => self.add(line, Suppression::All),
                    }
                }
            } else if let Some(rest) = lower.strip_prefix("noqa") {
                let rest = rest.trim_start();
                match rest.strip_prefix(':') {
                    Some(codes) => self.add(line, parse_codes(codes)),
                    None if rest.is_empty() || rest.starts_with(char::is_whitespace) => self.add(line, Suppression::All),
                    None => {}
                }
            }
        }
    }

    fn add(&mut self, line: usize, suppression: Suppression) {
        let merged = match (self.lines.remove(&line), suppression) {
            (Some(Suppression::All), _) | (_, Suppression::All) => Suppression::All,
            (Some(Suppression::Rules(mut a)), Suppression::Rules(b)) => {
                a.extend(b);
                Suppression::Rules(a)
            }
            (None, s) => s,
        };
        self.lines.insert(line, merged);
    }

    /// Does a comment on 0-based `line` suppress `rule`?
    pub fn suppresses(&self, rule: Rule, line: usize) -> bool {
        match self.lines.get(&line) {
            Some(Suppression::All) => true,
            Some(Suppression::Rules(rules)) => rules.contains(&rule),
            None => false,
        }
    }
}

/// `MEM001, eval-without-no-grad MEM004` -> rules; unknown codes are ignored (they may
/// belong to another tool sharing `noqa`).
fn parse_codes(list: &str) -> Suppression {
    let rules = list
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|c| !c.is_empty())
        .filter_map(|c| Rule::from_code_or_name(c).ok())
        .collect();
    Suppression::Rules(rules)
}
