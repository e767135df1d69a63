//! A rewrite of a Python source and where each piece of the original went.
//!
//! Transformations describe their change as [`Edit`]s on the original text: each replaces
//! one byte range with pieces that are new text or copies of original ranges (moved code,
//! possibly re-indented). [`Editor::finish`] applies them and keeps, for every output
//! piece, the original bytes it came from, so that a finding's position in the original
//! can be followed into the rewrite ([`Rewrite::map_offset`], [`Rewrite::line_map`]).

use std::collections::HashSet;
use std::ops::Range;

use memlint_python::tree_sitter::{Node, Tree};

/// A rewritten module.
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// The rewritten module's text.
    pub text: String,
    /// For each line of the original (index 0 is line 1), the line of the rewrite (1-based)
    /// its first non-blank character went to; `None` for a line that was removed.
    pub line_map: Vec<Option<usize>>,
    /// Modules written beside the rewritten one (file name, text): a factory moved into a
    /// sibling module.
    pub modules: Vec<(String, String)>,
    segments: Vec<Segment>,
    /// Original ranges copied into [`Rewrite::modules`]: (range, module index, offset of
    /// the copy in that module's text).
    moved_out: Vec<(Range<usize>, usize, usize)>,
}

/// Where original bytes went. `exact`: byte `b` of `orig` went to `new_start + (b -
/// orig.start)`; otherwise every byte of `orig` went to `new_start` (replaced text).
#[derive(Debug, Clone)]
struct Segment {
    orig: Range<usize>,
    new_start: usize,
    exact: bool,
    /// Lower is preferred when a byte went to several places: 0 a copy of moved code, 1
    /// text left in place, 2 the start of the text that replaced it.
    rank: u8,
}

impl Rewrite {
    /// A rewrite known only by where each original line went (a finding is then followed
    /// by its line alone): for rewrites made outside [`crate::transform`].
    pub fn from_lines(text: String, line_map: Vec<Option<usize>>) -> Rewrite {
        Rewrite { text, line_map, modules: Vec::new(), segments: Vec::new(), moved_out: Vec::new() }
    }

    /// Where the byte at `offset` of the original went in [`Rewrite::text`].
    pub fn map_offset(&self, offset: usize) -> Option<usize> {
        self.segments
            .iter()
            .filter(|s| s.orig.contains(&offset) || (s.orig.is_empty() && s.orig.start == offset))
            .min_by_key(|s| s.rank)
            .map(|s| if s.exact { s.new_start + (offset - s.orig.start) } else { s.new_start })
    }

    /// Where the byte at `offset` of the original went when it was moved into another
    /// module: (index in [`Rewrite::modules`], offset in its text).
    pub fn map_offset_to_module(&self, offset: usize) -> Option<(usize, usize)> {
        self.moved_out
            .iter()
            .find(|(range, _, _)| range.contains(&offset))
            .map(|(range, module, at)| (*module, at + (offset - range.start)))
    }

    /// The rewrite's line (1-based) of the original line `line` (1-based).
    pub fn map_line(&self, line: usize) -> Option<usize> {
        self.line_map.get(line.checked_sub(1)?).copied().flatten()
    }
}

/// One replacement of an original range.
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    pub range: Range<usize>,
    pub pieces: Vec<Piece>,
}

#[derive(Debug, Clone)]
pub(crate) enum Piece {
    Text(String),
    /// A copy of original bytes; each line of it (after the first when `first` is false)
    /// that starts with `from` outside a string has that prefix replaced by `to`.
    Copy { range: Range<usize>, from: String, to: String, first: bool },
}

impl Piece {
    pub fn text(text: impl Into<String>) -> Piece {
        Piece::Text(text.into())
    }
    pub fn copy(range: Range<usize>) -> Piece {
        Piece::Copy { range, from: String::new(), to: String::new(), first: false }
    }
    /// A copy whose lines (the first included) lose the indentation `from` and get `to`.
    pub fn reindented(range: Range<usize>, from: &str, to: &str) -> Piece {
        Piece::Copy { range, from: from.to_owned(), to: to.to_owned(), first: true }
    }
}

/// Collects edits on one source and applies them.
pub(crate) struct Editor<'s> {
    pub source: &'s str,
    edits: Vec<Edit>,
    /// Line starts that lie inside a string literal (a continuation line of a multi-line
    /// string): their leading whitespace is the string's content and is never changed.
    in_string: HashSet<usize>,
}

impl<'s> Editor<'s> {
    pub fn new(source: &'s str, tree: &Tree) -> Editor<'s> {
        let mut in_string = HashSet::new();
        let mut stack = vec![tree.root_node()];
        while let Some(node) = stack.pop() {
            if node.kind() == "string" || node.kind() == "string_content" {
                if node.start_position().row != node.end_position().row {
                    let range = node.byte_range();
                    for (i, c) in source[range.clone()].char_indices() {
                        if c == '\n' && range.start + i + 1 < range.end {
                            in_string.insert(range.start + i + 1);
                        }
                    }
                }
                continue;
            }
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
        Editor { source, edits: Vec::new(), in_string }
    }

    pub fn edit(&mut self, range: Range<usize>, pieces: Vec<Piece>) {
        self.edits.push(Edit { range, pieces });
    }
    pub fn replace(&mut self, range: Range<usize>, text: impl Into<String>) {
        self.edit(range, vec![Piece::text(text)]);
    }
    pub fn insert(&mut self, at: usize, text: impl Into<String>) {
        self.edit(at..at, vec![Piece::text(text)]);
    }
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// Adds `indent` at the start of every line that `range` touches, except blank lines
    /// and lines that continue a string.
    pub fn indent_lines(&mut self, range: Range<usize>, indent: &str) {
        for start in line_starts_in(self.source, range) {
            if self.in_string.contains(&start) {
                continue;
            }
            let line_end = self.source[start..].find('\n').map_or(self.source.len(), |i| start + i);
            if self.source[start..line_end].trim().is_empty() {
                continue;
            }
            self.insert(start, indent);
        }
    }

    /// Applies the edits; `None` when two of them overlap (a transformation's bug).
    pub fn finish(self, modules: Vec<(String, String)>) -> Option<Rewrite> {
        self.finish_moving(modules, Vec::new())
    }

    /// [`Editor::finish`] for a rewrite that copies original ranges, verbatim, into the
    /// modules it adds: `moved_out` gives (range, module index, offset in that module).
    pub fn finish_moving(mut self, modules: Vec<(String, String)>, moved_out: Vec<(Range<usize>, usize, usize)>) -> Option<Rewrite> {
        self.edits.sort_by_key(|e| (e.range.start, e.range.end));
        for pair in self.edits.windows(2) {
            if pair[0].range.end > pair[1].range.start {
                debug_assert!(false, "overlapping edits {:?} and {:?}", pair[0].range, pair[1].range);
                return None;
            }
        }
        let source = self.source;
        let mut text = String::with_capacity(source.len() + 256);
        let mut segments = Vec::new();
        let mut at = 0;
        for edit in &self.edits {
            if at < edit.range.start {
                segments.push(Segment { orig: at..edit.range.start, new_start: text.len(), exact: true, rank: 1 });
                text.push_str(&source[at..edit.range.start]);
            }
            if !edit.range.is_empty() {
                segments.push(Segment { orig: edit.range.clone(), new_start: text.len(), exact: false, rank: 2 });
            }
            for piece in &edit.pieces {
                match piece {
                    Piece::Text(t) => text.push_str(t),
                    Piece::Copy { range, from, to, first } => {
                        let mut line_start = range.start;
                        let mut first_line = true;
                        while line_start < range.end {
                            let line_end = source[line_start..range.end].find('\n').map_or(range.end, |i| line_start + i + 1);
                            let mut from_here = line_start;
                            let is_line_start = line_start == 0 || source.as_bytes()[line_start - 1] == b'\n';
                            if (!first_line || *first)
                                && is_line_start
                                && !self.in_string.contains(&line_start)
                                && (!from.is_empty() || !to.is_empty())
                                && !source[line_start..line_end].trim().is_empty()
                                && source[line_start..line_end].starts_with(from.as_str())
                            {
                                segments.push(Segment {
                                    orig: line_start..line_start + from.len(),
                                    new_start: text.len(),
                                    exact: false,
                                    rank: 0,
                                });
                                text.push_str(to);
                                from_here = line_start + from.len();
                            }
                            segments.push(Segment { orig: from_here..line_end, new_start: text.len(), exact: true, rank: 0 });
                            text.push_str(&source[from_here..line_end]);
                            line_start = line_end;
                            first_line = false;
                        }
                    }
                }
            }
            at = at.max(edit.range.end);
        }
        if at < source.len() {
            segments.push(Segment { orig: at..source.len(), new_start: text.len(), exact: true, rank: 1 });
            text.push_str(&source[at..]);
        }
        let mut rewrite = Rewrite { text, line_map: Vec::new(), modules, segments, moved_out };
        let new_starts = line_start_offsets(&rewrite.text);
        let mut line_map = Vec::new();
        for start in line_start_offsets(source) {
            let end = source[start..].find('\n').map_or(source.len(), |i| start + i);
            let first = source[start..end].find(|c: char| !c.is_whitespace()).map_or(start, |i| start + i);
            line_map.push(rewrite.map_offset(first).map(|new| line_of(&new_starts, new)));
        }
        rewrite.line_map = line_map;
        Some(rewrite)
    }
}

/// Offsets where lines start (0 first).
pub fn line_start_offsets(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(text.match_indices('\n').map(|(i, _)| i + 1).filter(|i| *i < text.len()));
    starts
}

/// The 1-based line of `offset`, given [`line_start_offsets`].
pub fn line_of(starts: &[usize], offset: usize) -> usize {
    match starts.binary_search(&offset) {
        Ok(i) => i + 1,
        Err(i) => i,
    }
}

/// The starts of the lines that `range` touches.
fn line_starts_in(source: &str, range: Range<usize>) -> Vec<usize> {
    let mut starts = vec![line_start(source, range.start)];
    for (i, c) in source[range.clone()].char_indices() {
        if c == '\n' && range.start + i + 1 < range.end {
            starts.push(range.start + i + 1);
        }
    }
    starts
}

/// The offset where the line holding `offset` starts.
pub fn line_start(source: &str, offset: usize) -> usize {
    source[..offset].rfind('\n').map_or(0, |i| i + 1)
}

/// The offset just past the end of the line holding `offset` (its `\n` excluded).
pub fn line_end(source: &str, offset: usize) -> usize {
    source[offset..].find('\n').map_or(source.len(), |i| offset + i)
}

/// The leading whitespace of the line holding `offset`.
pub fn indentation(source: &str, offset: usize) -> &str {
    let start = line_start(source, offset);
    let line = &source[start..line_end(source, start)];
    &line[..line.len() - line.trim_start().len()]
}

/// Is `node` the first thing on its line (only whitespace before it)?
pub fn starts_line(source: &str, node: Node) -> bool {
    source[line_start(source, node.start_byte())..node.start_byte()].trim().is_empty()
}

/// The file's unit of indentation: the extra indentation of the first block that starts on
/// its own line (four spaces when there is none).
pub fn indent_unit(source: &str, tree: &Tree) -> String {
    let mut stack = vec![tree.root_node()];
    let mut best: Option<(usize, String)> = None;
    while let Some(node) = stack.pop() {
        if node.kind() == "block" && node.named_child_count() > 0 {
            if let Some(parent) = node.parent() {
                if parent.start_position().row < node.start_position().row && starts_line(source, node) {
                    let inner = indentation(source, node.start_byte());
                    let outer = indentation(source, parent.start_byte());
                    if let Some(extra) = inner.strip_prefix(outer) {
                        if !extra.is_empty() && best.as_ref().is_none_or(|(at, _)| node.start_byte() < *at) {
                            best = Some((node.start_byte(), extra.to_owned()));
                        }
                    }
                }
            }
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    best.map_or_else(|| "    ".to_owned(), |(_, unit)| unit)
}

/// Names that exist nowhere in a file, for new bindings: never an identifier of the file,
/// a keyword or a builtin.
pub struct FreshNames {
    taken: HashSet<String>,
}

impl FreshNames {
    pub fn new(source: &str, tree: &Tree) -> FreshNames {
        let mut taken: HashSet<String> = KEYWORDS.iter().chain(BUILTINS).map(|s| s.to_string()).collect();
        let mut stack = vec![tree.root_node()];
        while let Some(node) = stack.pop() {
            if node.kind() == "identifier" {
                taken.insert(source[node.byte_range()].to_owned());
            }
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
        FreshNames { taken }
    }

    /// Names free except `taken` (and keywords and builtins).
    pub fn from_taken(taken: impl IntoIterator<Item = String>) -> FreshNames {
        let mut all: HashSet<String> = KEYWORDS.iter().chain(BUILTINS).map(|s| s.to_string()).collect();
        all.extend(taken);
        FreshNames { taken: all }
    }

    /// `base` itself when free, else `base2`, `base3`, ...
    pub fn take(&mut self, base: &str) -> String {
        if self.taken.insert(base.to_owned()) {
            return base.to_owned();
        }
        self.numbered(base, 2)
    }

    /// `base1`, `base2`, ...: the first free.
    pub fn numbered(&mut self, base: &str, from: usize) -> String {
        let mut n = from;
        loop {
            let name = format!("{base}{n}");
            if self.taken.insert(name.clone()) {
                return name;
            }
            n += 1;
        }
    }

    pub fn is_taken(&self, name: &str) -> bool {
        self.taken.contains(name)
    }
}

pub const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
    "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
    "return", "try", "while", "with", "yield", "match", "case", "type", "print", "exec",
];

pub const BUILTINS: &[&str] = &[
    "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "breakpoint", "bytearray", "bytes", "callable", "chr",
    "classmethod", "compile", "complex", "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate", "eval", "exec",
    "exit", "filter", "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash", "help", "hex", "id", "input", "int",
    "isinstance", "issubclass", "iter", "len", "license", "list", "locals", "map", "max", "memoryview", "min", "next", "object",
    "oct", "open", "ord", "pow", "property", "quit", "range", "repr", "reversed", "round", "set", "setattr", "slice", "sorted",
    "staticmethod", "str", "sum", "super", "tuple", "type", "vars", "zip", "__import__", "__name__", "__file__", "__doc__",
    "__builtins__", "__spec__", "__loader__", "__package__", "__debug__", "__class__", "NotImplemented", "Ellipsis",
    "BaseException", "Exception", "StopIteration", "ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError",
    "AttributeError", "ImportError", "ModuleNotFoundError", "NameError", "NotImplementedError", "OSError", "IOError",
    "KeyboardInterrupt", "AssertionError", "ZeroDivisionError", "FileNotFoundError", "StopAsyncIteration", "GeneratorExit",
    "SystemExit", "Warning", "UserWarning", "DeprecationWarning", "RuntimeWarning", "ArithmeticError", "LookupError",
    "EOFError", "MemoryError", "OverflowError", "RecursionError", "UnicodeError", "UnicodeDecodeError", "UnicodeEncodeError",
    "PermissionError", "TimeoutError", "unicode", "xrange", "basestring", "long", "raw_input", "reduce", "file", "cmp",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn editor_on(source: &str) -> (memlint_python::ParsedModule,) {
        (memlint_python::parse(source),)
    }

    #[test]
    fn replacements_map_offsets_and_lines() {
        let source = "a = 1\nb = a\nprint(b)\n";
        let (parsed,) = editor_on(source);
        let mut editor = Editor::new(source, &parsed.tree);
        editor.replace(0..1, "alpha");
        editor.insert(6, "x = 0\n");
        let rewrite = editor.finish(Vec::new()).unwrap();
        assert_eq!(rewrite.text, "alpha = 1\nx = 0\nb = a\nprint(b)\n");
        assert_eq!(rewrite.line_map, vec![Some(1), Some(3), Some(4)]);
        assert_eq!(rewrite.map_offset(0), Some(0));
        assert_eq!(rewrite.map_offset(4), Some(8), "`1` after the replaced name");
        assert_eq!(rewrite.map_offset(10), Some(20), "`a` of line 2");
    }

    #[test]
    fn a_moved_copy_is_preferred_and_reindented_outside_strings() {
        let source = "def f():\n    x = '''a\n    b'''\n    return x\n";
        let (parsed,) = editor_on(source);
        let mut editor = Editor::new(source, &parsed.tree);
        let body = 13..source.len();
        editor.edit(body.clone(), vec![Piece::text("return g()\n")]);
        editor.edit(0..0, vec![Piece::text("def g():\n"), Piece::reindented(line_start(source, 13)..source.len(), "    ", "  "), Piece::text("\n")]);
        let rewrite = editor.finish(Vec::new()).unwrap();
        assert_eq!(rewrite.text, "def g():\n  x = '''a\n    b'''\n  return x\n\ndef f():\n    return g()\n");
        assert_eq!(rewrite.line_map, vec![Some(6), Some(2), Some(3), Some(4)]);
    }

    #[test]
    fn the_indent_unit_is_the_files() {
        let parsed = memlint_python::parse("if x:\n\ty = 1\n");
        assert_eq!(indent_unit("if x:\n\ty = 1\n", &parsed.tree), "\t");
        let parsed = memlint_python::parse("x = 1\n");
        assert_eq!(indent_unit("x = 1\n", &parsed.tree), "    ");
    }
}
