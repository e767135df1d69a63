//! Suppression comments: `# noqa`, `# noqa: MEM001,MEM004`, `# memlint: ignore[MEM001]`
//! on the reported line, and `# memlint: skip-file` anywhere.
//!
//! Each directive keeps where it is and what it lists, so that after suppression the
//! linter can say which directives suppressed something (rules that check directives,
//! such as `unused-noqa`, read that; see [`crate::checker::Suppressions`]).

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use memlint_python::tree_sitter::Tree;
use memlint_python::LineIndex;

use crate::Rule;

/// Which spelling a directive uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectiveKind {
    /// `# noqa` / `# noqa: CODES`, shared with ruff, flake8 and other tools.
    Noqa,
    /// `# memlint: ignore` / `# memlint: ignore[CODES]`, memlint's own.
    MemlintIgnore,
}

impl DirectiveKind {
    /// How the directive is named in messages (`noqa`, `memlint: ignore`).
    pub fn label(self) -> &'static str {
        match self {
            DirectiveKind::Noqa => "noqa",
            DirectiveKind::MemlintIgnore => "memlint: ignore",
        }
    }
}

/// One entry of a directive's code list, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedCode {
    /// The text as written (`MEM004`, `eval-without-no-grad`, `E501`, `MEM1`).
    pub text: String,
    /// The memlint rule it names, if any (a code in any case, or a rule name).
    pub rule: Option<Rule>,
}

/// One suppression directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub kind: DirectiveKind,
    /// 0-based line of the comment.
    pub line: usize,
    /// Byte range of the comment that holds it (a comment may hold several directives:
    /// `# type: ignore  # noqa: MEM001`).
    pub comment: Range<usize>,
    /// Byte range of the directive: from its `#` to the end of its code list (or of the
    /// word `noqa` / `ignore` when it lists none).
    pub range: Range<usize>,
    /// `None`: a blanket directive (suppresses every rule). Otherwise the listed codes,
    /// in order, and the byte range of the list (from the first code to the last).
    pub codes: Option<(Vec<ListedCode>, Range<usize>)>,
}

impl Directive {
    /// Does this directive suppress `rule`?
    pub fn suppresses(&self, rule: Rule) -> bool {
        match &self.codes {
            None => true,
            Some((codes, _)) => codes.iter().any(|c| c.rule == Some(rule)),
        }
    }

    /// Does it list `rule` by code or name?
    pub fn lists(&self, rule: Rule) -> bool {
        self.codes.as_ref().is_some_and(|(codes, _)| codes.iter().any(|c| c.rule == Some(rule)))
    }
}

/// The suppression comments of one module.
#[derive(Debug, Clone, Default)]
pub struct Directives {
    /// In source order.
    pub directives: Vec<Directive>,
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
            directives.add_comment(index.line_of(node.start_byte()), node.byte_range(), source);
        }
        directives
    }

    fn add_comment(&mut self, line: usize, comment: Range<usize>, source: &str) {
        let text = &source[comment.clone()];
        // A comment may hold several directives: `# type: ignore  # noqa: MEM001`. Each
        // `#` starts a part; a part is a directive when it starts with one.
        let hashes: Vec<usize> = text.match_indices('#').map(|(i, _)| i).collect();
        for (n, &hash) in hashes.iter().enumerate() {
            let part_end = hashes.get(n + 1).copied().unwrap_or(text.len());
            let part = &text[hash + 1..part_end];
            let body_offset = hash + 1 + (part.len() - part.trim_start().len());
            let body = &text[body_offset..part_end];
            let at = comment.start + body_offset;
            let start = comment.start + hash;
            if let Some(directive) = parse_directive(body, at) {
                match directive {
                    Parsed::SkipFile => self.skip_file = true,
                    Parsed::Directive { kind, end, codes } => {
                        self.directives.push(Directive { kind, line, comment: comment.clone(), range: start..end, codes })
                    }
                }
            }
        }
    }

    /// The directives on 0-based `line`.
    pub fn on_line(&self, line: usize) -> impl Iterator<Item = (usize, &Directive)> {
        // Directives are in source order, so a line's directives are contiguous.
        let first = self.directives.partition_point(|d| d.line < line);
        self.directives[first..].iter().enumerate().take_while(move |(_, d)| d.line == line).map(move |(i, d)| (first + i, d))
    }

    /// Does a comment on 0-based `line` suppress `rule`?
    pub fn suppresses(&self, rule: Rule, line: usize) -> bool {
        self.on_line(line).any(|(_, d)| d.suppresses(rule))
    }
}

enum Parsed {
    SkipFile,
    Directive { kind: DirectiveKind, end: usize, codes: Option<(Vec<ListedCode>, Range<usize>)> },
}

/// Parses one comment part's text `body` (after `#` and blanks; `at` is its byte
/// offset in the source).
fn parse_directive(body: &str, at: usize) -> Option<Parsed> {
    let lower = body.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("memlint:") {
        let after_colon = "memlint:".len() + (rest.len() - rest.trim_start().len());
        let rest = rest.trim_start();
        if rest.trim_end() == "skip-file" {
            return Some(Parsed::SkipFile);
        }
        let after = rest.strip_prefix("ignore")?;
        let keyword_end = after_colon + "ignore".len();
        if after.starts_with('[') {
            let close = after.find(']')?;
            let list_start = keyword_end + 1;
            let codes = list_codes(&body[list_start..keyword_end + close], at + list_start, |_| true);
            return Some(Parsed::Directive {
                kind: DirectiveKind::MemlintIgnore,
                end: at + keyword_end + close + 1,
                codes: Some(codes),
            });
        }
        if after.is_empty() || after.starts_with(char::is_whitespace) {
            return Some(Parsed::Directive { kind: DirectiveKind::MemlintIgnore, end: at + keyword_end, codes: None });
        }
        return None;
    }
    let rest = lower.strip_prefix("noqa")?;
    let trimmed = rest.trim_start();
    if let Some(list) = trimmed.strip_prefix(':') {
        // As flake8 and ruff read it: the list is the run of code-shaped words after the
        // colon (`# noqa: E501 long URL` lists `E501`); memlint also takes rule names.
        let list_start = "noqa".len() + (rest.len() - trimmed.len()) + 1;
        let codes = list_codes(&body[list_start..list_start + list.len()], at + list_start, is_code_shaped);
        let end = if codes.0.is_empty() { at + list_start } else { codes.1.end };
        return Some(Parsed::Directive { kind: DirectiveKind::Noqa, end, codes: Some(codes) });
    }
    if rest.is_empty() || rest.starts_with(char::is_whitespace) {
        return Some(Parsed::Directive { kind: DirectiveKind::Noqa, end: at + "noqa".len(), codes: None });
    }
    None
}

/// The words of `list` (separated by commas and blanks) while `keep` accepts them, and
/// the byte range they span (`at` is `list`'s offset in the source).
fn list_codes(list: &str, at: usize, keep: impl Fn(&str) -> bool) -> (Vec<ListedCode>, Range<usize>) {
    let mut codes = Vec::new();
    let mut span: Option<Range<usize>> = None;
    let mut offset = 0;
    for word in list.split(|c: char| c == ',' || c.is_whitespace()) {
        let word_at = offset;
        offset += word.len() + 1;
        if word.is_empty() {
            continue;
        }
        if !keep(word) {
            break;
        }
        let range = at + word_at..at + word_at + word.len();
        span = Some(match span {
            Some(s) => s.start..range.end,
            None => range,
        });
        codes.push(ListedCode { text: word.to_owned(), rule: Rule::from_code_or_name(word).ok() });
    }
    (codes, span.unwrap_or(at..at))
}

/// A code as flake8 reads it (letters then digits: `E501`, `MEM004`, `ERA001`), or a
/// kebab-case rule name (`eval-without-no-grad`).
pub(crate) fn is_code_shaped(word: &str) -> bool {
    let letters = word.bytes().take_while(u8::is_ascii_alphabetic).count();
    let code = letters > 0 && letters < word.len() && word.bytes().skip(letters).all(|b| b.is_ascii_digit());
    code || is_name_shaped(word)
}

/// A kebab-case name: lowercase words and digits joined by single `-`.
pub(crate) fn is_name_shaped(word: &str) -> bool {
    word.contains('-')
        && word.split('-').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directives(source: &str) -> Directives {
        Directives::from_tree(&memlint_python::parse_with(source, None), source)
    }

    #[test]
    fn ranges_and_lists() {
        let source = "x = 1  # type: ignore  # noqa: MEM004, E501 long url\ny = 2  # memlint: ignore[MEM1 eval-without-no-grad]\nz = 3 # NOQA\n";
        let d = directives(source);
        assert_eq!(d.directives.len(), 3);
        assert_eq!(&source[d.directives[0].range.clone()], "# noqa: MEM004, E501");
        let (codes, list) = d.directives[0].codes.clone().unwrap();
        assert_eq!(&source[list], "MEM004, E501");
        assert_eq!(codes.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(), ["MEM004", "E501"]);
        assert_eq!(codes[0].rule, Some(Rule::EmptyCacheInLoop));
        assert_eq!(codes[1].rule, None);
        assert_eq!(&source[d.directives[1].range.clone()], "# memlint: ignore[MEM1 eval-without-no-grad]");
        let (codes, _) = d.directives[1].codes.clone().unwrap();
        assert_eq!(codes[1].rule, Some(Rule::EvalWithoutNoGrad));
        assert_eq!(&source[d.directives[2].range.clone()], "# NOQA");
        assert!(d.directives[2].codes.is_none());
        assert!(d.suppresses(Rule::DataParallel, 2) && !d.suppresses(Rule::DataParallel, 0));
        assert!(d.suppresses(Rule::EmptyCacheInLoop, 0));
    }

    #[test]
    fn not_directives() {
        let d = directives("x = '# noqa'  # noqaxyz\n# memlint: ignored\ny = 1  # noqa:\n");
        assert_eq!(d.directives.len(), 1, "{:?}", d.directives);
        assert_eq!(d.directives[0].codes.as_ref().unwrap().0.len(), 0);
        assert!(directives("# memlint: skip-file\n").skip_file);
    }

    #[test]
    fn shapes() {
        assert!(is_code_shaped("E501") && is_code_shaped("MEM1") && is_code_shaped("eval-without-no-grad"));
        assert!(!is_code_shaped("long") && !is_code_shaped("--") && !is_code_shaped("501"));
    }
}
