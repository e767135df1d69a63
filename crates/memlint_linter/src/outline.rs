//! The outline scan: where the bodies of top-level functions and methods are, found
//! without parsing. A file the pre-filter lets through is often a model library where one
//! method in fifty could report something; [`crate::skip`] blanks the bodies that cannot
//! matter so tree-sitter parses only the rest.
//!
//! The scan follows Python's tokenizer (strings with their prefixes, f-string replacement
//! fields, comments, brackets, backslash continuations, logical lines and indentation).
//! Anything it does not model exactly — a tab or form feed in indentation, a carriage
//! return, an unterminated string or bracket, inconsistent indentation, a quote in an
//! f-string format spec — makes it return `None`, and the file is parsed whole.

use std::ops::Range;

/// The body of a function defined at module level or directly in a class body (however
/// deeply classes nest), and only there: a function inside any other statement
/// (`if`, `try`, another function) belongs to whatever contains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FunctionBody<'a> {
    /// The function's name.
    pub name: &'a str,
    /// Where the definition starts: its first decorator, or `def` / `async`.
    pub outer_start: usize,
    /// From just after the header's `:` to the end of the body's last logical line (its
    /// newline excluded).
    pub range: Range<usize>,
    /// Where the body's first statement starts.
    pub first_statement: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Class,
    /// A function: the index of its entry in the bodies found, when it is one we report.
    Function(Option<usize>),
    Other,
}

/// A string being scanned.
#[derive(Clone, Copy)]
struct StringFrame {
    quote: u8,
    triple: bool,
    /// f-string or t-string: `{` opens a replacement field.
    formatted: bool,
    raw: bool,
}

enum Frame {
    String(StringFrame),
    /// A replacement field of an f-string: its own bracket depth, and whether its format
    /// spec (after a top-level `:` or `!`) has started.
    Field { depth: u32, in_spec: bool },
}

/// The logical line being scanned (top level only).
#[derive(Default)]
struct Line<'a> {
    /// Offset of its first token; `None` while only whitespace and comments were seen.
    start: Option<usize>,
    indent: usize,
    first_word: &'a str,
    second_word: &'a str,
    third_word: &'a str,
    words_seen: usize,
    /// The last significant byte (outside comments) was a `:` at bracket depth 0.
    ends_with_colon: bool,
    /// The first `:` at bracket depth 0.
    first_colon: Option<usize>,
    /// Just past its last significant byte.
    end: usize,
    /// Its first token is a string, and nothing else has followed yet.
    only_a_string: bool,
    /// The first `=` at bracket depth 0 that assigns (not `==`, `<=`, `+=`...).
    first_assign: Option<usize>,
    /// A `;` at bracket depth 0: more than one statement.
    has_semicolon: bool,
}

struct Scanner<'a> {
    source: &'a str,
    bodies: Vec<FunctionBody<'a>>,
    quiet: Vec<Range<usize>>,
    imports: Vec<Range<usize>>,
    lone_strings: Vec<Range<usize>>,
    assignments: Vec<Assignment>,
    /// Open blocks: the indentation of their header and what they are.
    blocks: Vec<(usize, BlockKind)>,
    /// Indentation levels, as Python's tokenizer keeps them.
    levels: Vec<usize>,
    /// The previous logical line opened a block.
    expect_indent: bool,
    /// A function whose first statement is the next logical line.
    awaiting_first: Option<usize>,
    /// End of the previous logical line.
    previous_end: usize,
    /// Start of the decorators right before the current line, if any.
    decorators_from: Option<usize>,
}

fn is_identifier_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Is `word` a string prefix (`r`, `b`, `f`, `rb`, `Rb`, `fr`, `t`, `u`...)? Returns
/// (formatted, raw).
fn string_prefix(word: &str) -> Option<(bool, bool)> {
    if word.is_empty() || word.len() > 2 {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let (mut formatted, mut raw, mut bytes, mut unicode) = (false, false, false, false);
    for c in lower.chars() {
        match c {
            'f' | 't' if !formatted => formatted = true,
            'r' if !raw => raw = true,
            'b' if !bytes => bytes = true,
            'u' if !unicode => unicode = true,
            _ => return None,
        }
    }
    let valid = match lower.len() {
        1 => true,
        _ => raw && !unicode && (formatted ^ bytes),
    };
    valid.then_some((formatted, raw))
}

impl<'a> Scanner<'a> {
    /// Handles a complete logical line. `None` on indentation Python would reject.
    fn end_line(&mut self, line: &Line<'a>) -> Option<()> {
        let start = line.start?;
        let indent = line.indent;
        let current = *self.levels.last().expect("level 0 is never popped");
        if indent > current {
            if !self.expect_indent {
                return None; // unexpected indent
            }
            self.levels.push(indent);
        } else {
            if self.expect_indent {
                return None; // expected an indented block
            }
            while *self.levels.last().expect("level 0") > indent {
                self.levels.pop();
            }
            if *self.levels.last().expect("level 0") != indent {
                return None; // unindent does not match any outer level
            }
        }
        if line.only_a_string {
            self.quiet.push(start..line.end);
        }
        if line.first_word == "import" || line.first_word == "from" {
            self.imports.push(start..line.end);
        }
        let is_decorator = self.source.as_bytes()[start] == b'@';
        let outer_start = self.decorators_from.unwrap_or(start);
        self.decorators_from = if is_decorator { Some(outer_start) } else { None };
        if let Some(index) = self.awaiting_first.take() {
            self.bodies[index].first_statement = start;
        }
        // Close the blocks this line is not inside.
        while let Some(&(block_indent, kind)) = self.blocks.last() {
            if block_indent < indent {
                break;
            }
            self.blocks.pop();
            if let BlockKind::Function(Some(index)) = kind {
                self.bodies[index].range.end = self.previous_end;
            }
        }
        // An assignment directly at module level or in a class body (not in any other
        // block): the semantic model binds its targets in the module's scope.
        if let Some(assign) = line.first_assign {
            let outline_level = self.blocks.iter().all(|(_, k)| *k == BlockKind::Class);
            if outline_level && !line.has_semicolon && !line.ends_with_colon && !is_decorator {
                self.assignments.push(Assignment { range: start..line.end, targets: start..assign });
            }
        }
        if line.only_a_string {
            // Directly in a class body, or directly in the body of a function at
            // outline level: never inside a loop or any other statement.
            let (innermost, outer) = match self.blocks.split_last() {
                Some((last, outer)) => (Some(last.1), outer),
                None => (None, &[][..]),
            };
            let outline_level = matches!(innermost, Some(BlockKind::Class | BlockKind::Function(Some(_))))
                && outer.iter().all(|(_, k)| *k == BlockKind::Class);
            if outline_level {
                self.lone_strings.push(start..line.end);
            }
        }
        self.expect_indent = line.ends_with_colon;
        if line.ends_with_colon {
            let is_def = line.first_word == "def" || (line.first_word == "async" && line.second_word == "def");
            let kind = if line.first_word == "class" {
                BlockKind::Class
            } else if is_def {
                let outline_level = self.blocks.iter().all(|(_, k)| *k == BlockKind::Class);
                let name = if line.first_word == "def" { line.second_word } else { line.third_word };
                let colon = line.first_colon?;
                if outline_level && !name.is_empty() {
                    self.bodies.push(FunctionBody { name, outer_start, range: colon + 1..colon + 1, first_statement: colon + 1 });
                    self.awaiting_first = Some(self.bodies.len() - 1);
                    BlockKind::Function(Some(self.bodies.len() - 1))
                } else {
                    BlockKind::Function(None)
                }
            } else {
                BlockKind::Other
            };
            self.blocks.push((indent, kind));
        }
        self.previous_end = line.end;
        Some(())
    }
}

/// An assignment statement at outline level (module level or directly in a class body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    /// The whole logical line.
    pub range: Range<usize>,
    /// What comes before its first `=`: the targets (and any annotation).
    pub targets: Range<usize>,
}

/// What the outline scan finds.
pub(crate) struct Outline<'a> {
    /// The bodies of the module-level functions and methods, in source order.
    pub bodies: Vec<FunctionBody<'a>>,
    /// Text that no rule and no fact of the semantic model reads, in source order:
    /// comments outside brackets, and statements that are a lone string (docstrings).
    pub quiet: Vec<Range<usize>>,
    /// `import` and `from ... import` statements, anywhere, in source order.
    pub imports: Vec<Range<usize>>,
    /// Assignment statements at outline level, in source order.
    pub assignments: Vec<Assignment>,
    /// Statements that are a lone string (docstrings) directly in a class body or in
    /// the body of a function at outline level, in source order.
    pub lone_strings: Vec<Range<usize>>,
}

/// The outline of `source`; `None` when the scan cannot be sure of the structure (see
/// the module docs).
pub(crate) fn outline(source: &str) -> Option<Outline<'_>> {
    let bytes = source.as_bytes();
    if memchr::memchr(b'\r', bytes).is_some() {
        return None;
    }
    let mut scanner = Scanner {
        source,
        bodies: Vec::new(),
        quiet: Vec::new(),
        imports: Vec::new(),
        assignments: Vec::new(),
        lone_strings: Vec::new(),
        blocks: Vec::new(),
        levels: vec![0],
        expect_indent: false,
        awaiting_first: None,
        previous_end: 0,
        decorators_from: None,
    };
    let mut frames: Vec<Frame> = Vec::new();
    let mut depth: u32 = 0;
    let mut line = Line::default();
    let mut physical_line_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(Frame::String(s)) = frames.last() {
            let s = *s;
            match b {
                b'\\' => {
                    // `\N{NAME}` is one escape, braces included.
                    if !s.raw && bytes.get(i + 1) == Some(&b'N') && bytes.get(i + 2) == Some(&b'{') {
                        let close = memchr::memchr(b'}', &bytes[i..])?;
                        i += close + 1;
                    } else if s.formatted && matches!(bytes.get(i + 1), Some(b'{' | b'}')) {
                        // A backslash does not escape a brace in an f-string.
                        i += 1;
                    } else {
                        i += 2;
                    }
                }
                b'\n' if !s.triple => return None,
                _ if b == s.quote => {
                    if !s.triple {
                        frames.pop();
                        i += 1;
                    } else if bytes.get(i + 1) == Some(&s.quote) && bytes.get(i + 2) == Some(&s.quote) {
                        frames.pop();
                        i += 3;
                    } else {
                        i += 1;
                    }
                    if frames.is_empty() {
                        line.end = i;
                        line.ends_with_colon = false;
                    }
                }
                b'{' if s.formatted => {
                    if bytes.get(i + 1) == Some(&b'{') {
                        i += 2;
                    } else {
                        frames.push(Frame::Field { depth: 0, in_spec: false });
                        i += 1;
                    }
                }
                b'}' if s.formatted && bytes.get(i + 1) == Some(&b'}') => i += 2,
                _ => i += 1,
            }
            continue;
        }
        // Code: the top level, or a replacement field of an f-string.
        let top_level = frames.is_empty();
        if top_level && line.start.is_none() && !matches!(b, b' ' | b'\n' | b'#' | b'\\' | b'\t' | b'\x0c') {
            let leading = &bytes[physical_line_start..i];
            if leading.iter().any(|c| *c != b' ') {
                return None; // a tab or form feed in indentation
            }
            line.start = Some(i);
            line.indent = i - physical_line_start;
            line.only_a_string = matches!(b, b'\'' | b'"');
        } else if top_level && !matches!(b, b' ' | b'\n' | b'#' | b'\\' | b'\t' | b'\x0c') {
            // A second token (a prefix counts: `r"..."` is not quiet, conservatively).
            line.only_a_string = false;
        }
        if is_identifier_byte(b) && !b.is_ascii_digit() {
            let start = i;
            i = crate::prefilter::identifier_end(bytes, i);
            let word = source.get(start..i)?;
            if matches!(bytes.get(i), Some(b'\'' | b'"')) {
                if let Some((formatted, raw)) = string_prefix(word) {
                    if top_level && line.start == Some(start) && !formatted {
                        // `r"""..."""`: still a plain string (an f-string holds code).
                        line.only_a_string = true;
                    }
                    continue_string(bytes, &mut i, &mut frames, formatted, raw);
                    continue;
                }
            }
            if top_level {
                match line.words_seen {
                    0 => line.first_word = word,
                    1 => line.second_word = word,
                    2 => line.third_word = word,
                    _ => {}
                }
                line.words_seen += 1;
                line.end = i;
                line.ends_with_colon = false;
            }
            continue;
        }
        match b {
            b'\'' | b'"' => {
                continue_string(bytes, &mut i, &mut frames, false, false);
                continue;
            }
            b'#' => {
                let end = memchr::memchr(b'\n', &bytes[i..]).map(|n| i + n).unwrap_or(bytes.len());
                if top_level && depth == 0 {
                    scanner.quiet.push(i..end);
                }
                i = end;
                continue;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'\n') => {
                i += 2;
                if top_level {
                    physical_line_start = i;
                }
                continue;
            }
            b'\n' => {
                if top_level && depth == 0 {
                    if line.start.is_some() {
                        scanner.end_line(&line)?;
                    }
                    line = Line::default();
                }
                i += 1;
                if top_level {
                    physical_line_start = i;
                }
                continue;
            }
            b' ' | b'\t' | b'\x0c' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        match frames.last_mut() {
            Some(Frame::Field { depth: field_depth, in_spec }) => match b {
                b'(' | b'[' | b'{' => *field_depth += 1,
                b')' | b']' => *field_depth = field_depth.checked_sub(1)?,
                b'}' if *field_depth == 0 => {
                    frames.pop();
                }
                b'}' => *field_depth -= 1,
                b':' | b'!' if *field_depth == 0 => *in_spec = true,
                _ => {}
            },
            Some(Frame::String(_)) => unreachable!("strings are handled above"),
            None => {
                match b {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth = depth.checked_sub(1)?,
                    _ => {}
                }
                if b == b'=' && depth == 0 && i > 0 && bytes.get(i + 1) != Some(&b'=') && !matches!(bytes[i - 1], b'=' | b'<' | b'>' | b'!' | b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^' | b'@' | b':') {
                    line.first_assign.get_or_insert(i);
                }
                if b == b';' && depth == 0 {
                    line.has_semicolon = true;
                }
                if b == b':' && depth == 0 && bytes.get(i + 1) != Some(&b'=') {
                    line.first_colon.get_or_insert(i);
                    line.ends_with_colon = true;
                } else {
                    line.ends_with_colon = false;
                }
                line.end = i + 1;
            }
        }
        i += 1;
    }
    if !frames.is_empty() || depth != 0 {
        return None;
    }
    if line.start.is_some() {
        scanner.end_line(&line)?;
    }
    if scanner.expect_indent {
        return None; // the file ends with a block header
    }
    while let Some((_, kind)) = scanner.blocks.pop() {
        if let BlockKind::Function(Some(index)) = kind {
            scanner.bodies[index].range.end = scanner.previous_end;
        }
    }
    // Comments are found as they come, lone strings when their line ends: sort.
    scanner.quiet.sort_by_key(|r| r.start);
    Some(Outline {
        bodies: scanner.bodies,
        quiet: scanner.quiet,
        imports: scanner.imports,
        lone_strings: scanner.lone_strings,
        assignments: scanner.assignments,
    })
}

/// Opens a string at `bytes[*i]` (its quote; a prefix was already consumed) and moves
/// past the opening quote(s). A quote in an f-string's format spec is not modelled.
fn continue_string(bytes: &[u8], i: &mut usize, frames: &mut Vec<Frame>, formatted: bool, raw: bool) {
    let quote = bytes[*i];
    let triple = bytes.get(*i + 1) == Some(&quote) && bytes.get(*i + 2) == Some(&quote);
    if let Some(Frame::Field { in_spec: true, .. }) = frames.last() {
        // `f"{x:'>10}"`: the quote is a fill character, not a string. Give up on the file
        // by opening a string that never closes on this line.
        frames.push(Frame::String(StringFrame { quote: 0, triple: false, formatted: false, raw: true }));
        *i += 1;
        return;
    }
    frames.push(Frame::String(StringFrame { quote, triple, formatted, raw }));
    *i += if triple { 3 } else { 1 };
}

#[cfg(test)]
mod tests {
    use super::outline;

    /// Each body as (name, its text from the first statement on).
    fn bodies(source: &str) -> Option<Vec<(&str, &str)>> {
        outline(source).map(|o| o.bodies.iter().map(|b| (b.name, &source[b.first_statement..b.range.end])).collect())
    }

    fn quiet(source: &str) -> Vec<&str> {
        outline(source).unwrap().quiet.iter().map(|r| &source[r.clone()]).collect()
    }

    #[test]
    fn comments_outside_brackets_and_lone_strings_are_quiet() {
        let source = "'''doc'''\nx = f(a,  # inside\n      b)  # after\ndef g():\n    \"\"\"doc\n    more\"\"\"\n    s = 'not quiet'\n    'a' 'b'\n    r'raw'\n    f'{code()}'\n";
        assert_eq!(quiet(source), ["'''doc'''", "# after", "\"\"\"doc\n    more\"\"\"", "r'raw'"]);
    }

    #[test]
    fn top_level_functions_and_methods() {
        let source = "import x\n\ndef f(a, b=(1, 2)) -> int:  # c\n    return a\n\nclass A(B):\n    x = 1\n\n    @dec\n    async def g(self):\n        '''doc'''\n        y = 2\n        # trailing\n    def h(self): return 1\n";
        assert_eq!(bodies(source).unwrap(), [("f", "return a"), ("g", "'''doc'''\n        y = 2")]);
        let starts: Vec<&str> = outline(source).unwrap().bodies.iter().map(|b| &source[b.outer_start..b.outer_start + 5]).collect();
        assert_eq!(starts, ["def f", "@dec\n"]);
    }

    #[test]
    fn nested_functions_belong_to_their_function() {
        let source = "def outer():\n    def inner():\n        pass\n    return inner\nif x:\n    def g():\n        pass\n";
        assert_eq!(bodies(source).unwrap(), [("outer", "def inner():\n        pass\n    return inner")]);
    }

    #[test]
    fn nested_classes_keep_their_methods_at_outline_level() {
        let source = "class A:\n    class B:\n        def f(self):\n            return 1\n    def g(self):\n        pass\n";
        assert_eq!(bodies(source).unwrap(), [("f", "return 1"), ("g", "pass")]);
    }

    #[test]
    fn strings_brackets_and_continuations_do_not_end_a_body() {
        let source = "def f():\n    s = \"\"\"\ndef not_a_function():\n\"\"\"\n    t = (1,\n2)\n    u = 1 + \\\n3\n    return f\"{d[\"k\"]:>{w}}\" rb'\\''\nx = 1\n";
        let found = bodies(source).unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].1.ends_with("rb'\\''"));
    }

    #[test]
    fn what_the_scan_does_not_model_gives_up() {
        assert_eq!(bodies("def f():\n\treturn 1\n"), None);
        assert_eq!(bodies("def f():\r\n    return 1\r\n"), None);
        assert_eq!(bodies("def f():\n    s = 'abc\n"), None);
        assert_eq!(bodies("def f():\n    x = (1,\n"), None);
        assert_eq!(bodies("def f():\n        x = 1\n    y = 2\n"), None);
        assert_eq!(bodies("x = 1\n    y = 2\n"), None);
        assert_eq!(bodies("def f():\nx = 1\n"), None);
        assert_eq!(bodies("def f():\n"), None);
        assert_eq!(bodies("x = f\"{v:'>10}\"\n"), None);
    }

    #[test]
    fn named_unicode_escapes_and_doubled_braces() {
        let source = "def f():\n    return f\"\\N{EM DASH} {{x}} {y!r}\"\n";
        assert_eq!(bodies(source).unwrap(), [("f", "return f\"\\N{EM DASH} {{x}} {y!r}\"")]);
    }
}
