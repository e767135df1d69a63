//! Which lines of a code cell IPython reads as something other than Python, and the
//! Python-neutral placeholders that stand in for them in the program memlint lints.
//!
//! IPython only looks for its escapes (`%`, `!`, `?`, `x = !cmd`, ...) at the start of a
//! logical line, so a small line lexer tracks open brackets, triple-quoted strings and
//! backslash continuations: a `!important` line inside a docstring stays Python.

/// How IPython reads one line of a code cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKind {
    /// Plain Python (or blank).
    Python,
    /// A line magic, shell escape, help request or automagic (`%time f()`, `!pip install x`,
    /// `files = !ls`, `torch.cuda?`, `pip install x`).
    LineMagic,
    /// A line that continues the magic above it through a trailing backslash.
    Continuation,
    /// The `%%name ...` line that starts a cell magic.
    CellMagicHeader,
    /// A line of a cell magic whose body is not Python (`%%bash`, `%%writefile`, ...).
    CellMagicBody,
}

impl LineKind {
    pub(crate) fn is_magic(self) -> bool {
        self != LineKind::Python
    }
}

/// Cell magics whose body is Python that runs in the kernel (as ruff treats them): the
/// body is linted, only the `%%` line is replaced.
const PYTHON_CELL_MAGICS: &[&str] = &["capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"];

/// Subcommands that make `pip ...` / `conda ...` an automagic call rather than Python
/// (`pip install x` is never valid Python; `pip in x` is, and is left alone).
const PACKAGE_SUBCOMMANDS: &[&str] = &[
    "install", "uninstall", "list", "show", "freeze", "download", "remove", "update", "upgrade", "create", "info",
    "check", "cache", "config", "search", "env", "wheel",
];

/// Classifies every line of `text` (split on `\n`, so a trailing newline gives a last,
/// empty line, as Jupyter shows it).
pub(crate) fn classify(text: &str) -> Vec<LineKind> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut kinds = vec![LineKind::Python; lines.len()];

    // A cell magic must be the first non-blank line of the cell.
    let first = lines.iter().position(|l| !l.trim().is_empty());
    if let Some(first) = first {
        if let Some(rest) = lines[first].trim_start().strip_prefix("%%") {
            let name = rest.split(|c: char| c.is_whitespace()).next().unwrap_or("");
            kinds[first] = LineKind::CellMagicHeader;
            if !PYTHON_CELL_MAGICS.contains(&name) {
                for kind in &mut kinds[first + 1..] {
                    *kind = LineKind::CellMagicBody;
                }
                return kinds;
            }
            classify_python(&lines[first + 1..], &mut kinds[first + 1..]);
            return kinds;
        }
    }
    classify_python(&lines, &mut kinds);
    kinds
}

fn classify_python(lines: &[&str], kinds: &mut [LineKind]) {
    let mut state = LexState::default();
    let mut magic_continues = false;
    for (line, kind) in lines.iter().zip(kinds.iter_mut()) {
        if magic_continues {
            *kind = LineKind::Continuation;
            magic_continues = ends_with_backslash(line);
            continue;
        }
        if state.is_fresh() && is_line_magic(line) {
            *kind = LineKind::LineMagic;
            magic_continues = ends_with_backslash(line);
            continue;
        }
        let was_fresh = state.is_fresh();
        let last = state.lex_line(line);
        if was_fresh && state.is_fresh() && last == Some('?') {
            // `obj?`, `obj.method??`: help, never valid Python.
            *kind = LineKind::LineMagic;
        }
    }
}

fn ends_with_backslash(line: &str) -> bool {
    line.trim_end().ends_with('\\')
}

/// Is this line, at the start of a logical line, an IPython escape?
fn is_line_magic(line: &str) -> bool {
    let trimmed = line.trim_start();
    match trimmed.chars().next() {
        None => false,
        Some('%' | '!' | '?') => true,
        Some(_) => is_magic_assignment(trimmed) || is_package_automagic(trimmed),
    }
}

/// `files = !ls`, `a, b = %sx cmd`, `self.out = !cmd`: names, `=`, then `!` or `%`.
fn is_magic_assignment(line: &str) -> bool {
    let mut chars = line.char_indices().peekable();
    let mut saw_name = false;
    while let Some(&(_, c)) = chars.peek() {
        if c.is_alphanumeric() || c == '_' || c == '.' {
            saw_name = true;
            chars.next();
        } else if c == ',' || c == ' ' || c == '\t' {
            chars.next();
        } else {
            break;
        }
    }
    if !saw_name {
        return false;
    }
    let Some((at, '=')) = chars.next() else { return false };
    let rest = line[at + 1..].trim_start();
    !line[at + 1..].starts_with('=') && (rest.starts_with('!') || rest.starts_with('%'))
}

/// `pip install torch` / `conda install ...`: automagic (on by default in IPython).
fn is_package_automagic(line: &str) -> bool {
    let mut words = line.split_whitespace();
    matches!(words.next(), Some("pip" | "pip3" | "conda" | "mamba"))
        && words.next().is_some_and(|w| PACKAGE_SUBCOMMANDS.contains(&w))
}

/// The Python-neutral text that replaces a magic line in the program: `pass` at the line's
/// own indentation for a line that starts a statement (so a `!pip` line that is the only
/// statement of an `if` block keeps the block valid), and a comment for lines that do not
/// (continuations and cell-magic bodies, whose indentation means nothing to Python).
/// A trailing `\r` is kept so line endings stay as they were.
pub(crate) fn placeholder(kind: LineKind, line: &str) -> String {
    let cr = if line.ends_with('\r') { "\r" } else { "" };
    let indent = &line[..line.len() - line.trim_start().len()];
    match kind {
        LineKind::Python => line.to_owned(),
        LineKind::LineMagic => format!("{indent}{LINE_MAGIC_PLACEHOLDER}{cr}"),
        LineKind::CellMagicHeader => format!("{CELL_MAGIC_PLACEHOLDER}{cr}"),
        LineKind::Continuation | LineKind::CellMagicBody => format!("{COMMENT_PLACEHOLDER}{cr}"),
    }
}

pub(crate) const LINE_MAGIC_PLACEHOLDER: &str = "pass  # ipython magic";
pub(crate) const CELL_MAGIC_PLACEHOLDER: &str = "pass  # ipython cell magic";
pub(crate) const COMMENT_PLACEHOLDER: &str = "# ipython magic (continued)";

/// Where a line ends up, lexically, for the next one.
#[derive(Debug, Default, Clone, Copy)]
struct LexState {
    /// Open `(`, `[`, `{`.
    depth: u32,
    /// Inside a triple-quoted string with this quote.
    triple: Option<char>,
    /// Inside a single-quoted string continued with a backslash.
    single: Option<char>,
    /// The line ended with a backslash continuation.
    backslash: bool,
}

impl LexState {
    fn is_fresh(&self) -> bool {
        self.depth == 0 && self.triple.is_none() && self.single.is_none() && !self.backslash
    }

    /// Lexes one line; returns the last character of code on it (strings count as code,
    /// comments do not).
    fn lex_line(&mut self, line: &str) -> Option<char> {
        let cs: Vec<char> = line.trim_end_matches('\r').chars().collect();
        let mut last = None;
        let mut keep_single = false;
        self.backslash = false;
        let mut i = 0;
        while i < cs.len() {
            let c = cs[i];
            if let Some(q) = self.triple {
                if c == '\\' {
                    i += 2;
                    continue;
                }
                if c == q && cs.get(i + 1) == Some(&q) && cs.get(i + 2) == Some(&q) {
                    self.triple = None;
                    last = Some(q);
                    i += 3;
                    continue;
                }
                i += 1;
                continue;
            }
            if let Some(q) = self.single {
                if c == '\\' {
                    if i + 1 == cs.len() {
                        keep_single = true;
                    }
                    i += 2;
                    continue;
                }
                if c == q {
                    self.single = None;
                    last = Some(q);
                }
                i += 1;
                continue;
            }
            match c {
                '#' => break,
                '\'' | '"' => {
                    last = Some(c);
                    if cs.get(i + 1) == Some(&c) && cs.get(i + 2) == Some(&c) {
                        self.triple = Some(c);
                        i += 3;
                    } else {
                        self.single = Some(c);
                        i += 1;
                    }
                    continue;
                }
                '(' | '[' | '{' => self.depth += 1,
                ')' | ']' | '}' => self.depth = self.depth.saturating_sub(1),
                '\\' if cs[i + 1..].iter().all(|c| c.is_whitespace()) => {
                    self.backslash = true;
                    break;
                }
                _ => {}
            }
            if !c.is_whitespace() {
                last = Some(c);
            }
            i += 1;
        }
        if !keep_single {
            // An unterminated single-quoted string ends at the line (a syntax error that
            // should not swallow the rest of the cell).
            self.single = None;
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LineKind::*;

    #[test]
    fn escapes_at_the_start_of_a_logical_line() {
        let text = "!pip install -q torch\n%matplotlib inline\nx = 1\nfiles = !ls\ntorch.cuda?\n??torch\npip install x\npip in y\nz = 5 % 2\nif x != 1:\n    !nvidia-smi";
        assert_eq!(
            classify(text),
            [LineMagic, LineMagic, Python, LineMagic, LineMagic, LineMagic, LineMagic, Python, Python, Python, LineMagic]
        );
    }

    #[test]
    fn not_inside_strings_or_brackets() {
        let text = "s = \"\"\"\n!not a shell line\nwhat?\n\"\"\"\nf(\n  %d\n)\nx = 'a?'\n# what?";
        assert!(classify(text).iter().all(|k| *k == Python), "{:?}", classify(text));
    }

    #[test]
    fn continuation_and_cell_magics() {
        assert_eq!(classify("!pip install \\\n    torch\nx = 1"), [LineMagic, Continuation, Python]);
        assert_eq!(classify("\n%%bash\nls\n  echo"), [Python, CellMagicHeader, CellMagicBody, CellMagicBody]);
        assert_eq!(classify("%%time\nx = 1\n!ls"), [CellMagicHeader, Python, LineMagic]);
    }

    #[test]
    fn placeholders_keep_indentation() {
        assert_eq!(placeholder(LineMagic, "    !ls\r"), "    pass  # ipython magic\r");
        assert_eq!(placeholder(Continuation, "      torch"), "# ipython magic (continued)");
    }
}
