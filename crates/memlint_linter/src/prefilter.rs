//! The byte-level pre-filter: parsing is memlint's main cost, so a file is parsed only
//! when some enabled rule could fire in it. Each rule here has a *necessary* condition on
//! the file's words (identifiers, and the identifiers in `for`/`while` headers); the
//! tests `prefilter_is_sound` (property test) and `prefilter_keeps_every_fixture_finding`
//! check that filtering never changes what is reported.

use rustc_hash::FxHashSet;

use memlint_python::{function_name_says_eval, name_says_data, name_says_eval, name_says_optimizer};

use crate::{Rule, RuleSelection};

/// Identifiers whose presence can make a value a model or a tensor with history without
/// the name saying so: module classes, `forward`, `torch.nn` constructors, model zoos.
const MODULE_TOKENS: &[&str] = &[
    "Module", "LightningModule", "forward", "requires_grad_", "nn", "torchvision", "timm", "transformers",
];

/// What the words of a file (or of one function body) allow.
pub(crate) struct Words<'a> {
    pub(crate) identifiers: FxHashSet<&'a str>,
    /// Identifiers in loop headers (`for` target and iterable, `while` condition): what
    /// the semantic model reads to tell a loop over batches from any other loop.
    loop_header: FxHashSet<&'a str>,
    /// Names of `def`s (what the semantic model calls a function's name), once per `def`.
    pub(crate) functions: Vec<&'a str>,
    /// Names of `class`es, once per `class`.
    pub(crate) classes: Vec<&'a str>,
    /// `train(False)` appears (with any whitespace): `.train(False)` switches to eval mode.
    train_false: bool,
    /// Identifiers that are called somewhere, or imported under another name.
    called: FxHashSet<&'a str>,
    /// `X` in `self.X` followed by what can make it an assignment target (`=`, `,`, `:`,
    /// `)`, `]`): the semantic model reads such attributes from any method.
    pub(crate) self_assigned: FxHashSet<&'a str>,
    /// `X` in every `self.X`.
    pub(crate) self_attributes: FxHashSet<&'a str>,
    /// Every identifier followed by `(`: what the semantic model's call graph sees (only
    /// collected by [`Words::scan_except`], for function bodies).
    pub(crate) calls: FxHashSet<&'a str>,
    /// Identifiers not after a `.` (names, not attributes: what a binding can be looked
    /// up for). Not collected by [`Words::scan_body`]: only kept code's count, so a
    /// body's are collected once it is kept ([`Words::collect_bare`]).
    pub(crate) bare: FxHashSet<&'a str>,
    collect_bare: bool,
}

/// The index of the first byte at or after `j` that is not whitespace or in a comment.
fn skip_blank(bytes: &[u8], mut j: usize) -> usize {
    while j < bytes.len() {
        if bytes[j].is_ascii_whitespace() || bytes[j] == b'\\' {
            j += 1;
        } else if bytes[j] == b'#' {
            j = memchr::memchr(b'\n', &bytes[j..]).map(|n| j + n).unwrap_or(bytes.len());
        } else {
            break;
        }
    }
    j
}

/// Is the word that ends at `end` called (`(` follows) or imported under another name
/// (`as` follows)?
fn called_or_renamed(bytes: &[u8], end: usize) -> bool {
    let next = skip_blank(bytes, end);
    bytes.get(next) == Some(&b'(')
        || (bytes[next.min(bytes.len())..].starts_with(b"as") && !bytes.get(next + 2).map(|b| is_identifier_byte(*b)).unwrap_or(false))
}

/// Is `train` at `end` (just past the word) called with `False` as its first argument?
fn called_with_false(bytes: &[u8], end: usize) -> bool {
    let skip_ws = |mut j: usize| {
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        j
    };
    let open = skip_ws(end);
    if bytes.get(open) != Some(&b'(') {
        return false;
    }
    let arg = skip_ws(open + 1);
    bytes[arg.min(bytes.len())..].starts_with(b"False") && !bytes.get(arg + 5).map(|b| is_identifier_byte(*b)).unwrap_or(false)
}

/// `self` starts at `word_start` and its `.` ends at `at`: records the attribute, and
/// notes it as assigned when what follows can make it an assignment target: `=`, or, when `self` starts its line
/// (after any `(`, `[` or `*`), a tuple target's `,` / `)` / `]` or an annotation's `:`.
fn note_self_attribute<'a>(source: &'a str, word_start: usize, at: usize, words: &mut Words<'a>) {
    let bytes = source.as_bytes();
    let start = skip_blank(bytes, at);
    let mut end = start;
    while end < bytes.len() && is_identifier_byte(bytes[end]) {
        end += 1;
    }
    let Some(attribute) = source.get(start..end).filter(|a| !a.is_empty()) else { return };
    words.self_attributes.insert(attribute);
    let next = skip_blank(bytes, end);
    let starts_line = || {
        bytes[..word_start].iter().rev().take_while(|b| **b != b'\n').all(|b| matches!(b, b' ' | b'\t' | b'(' | b'[' | b'*'))
    };
    let target = match bytes.get(next) {
        // A constant never makes `self.X` a model or a loss (what the semantic model
        // reads assignments to `self.X` for).
        Some(b'=') => bytes.get(next + 1) != Some(&b'=') && !only_a_constant_follows(bytes, next + 1),
        Some(b',' | b':' | b')' | b']') => starts_line(),
        _ => false,
    };
    if target {
        words.self_assigned.insert(attribute);
    }
}

/// Is what follows `at` on its line one constant (a number, a one-line string without
/// `f`, `None`, `True`, `False`, with a sign), and then the end of the statement?
fn only_a_constant_follows(bytes: &[u8], at: usize) -> bool {
    let skip_spaces = |mut j: usize| {
        while j < bytes.len() && matches!(bytes[j], b' ' | b'\t') {
            j += 1;
        }
        j
    };
    let mut j = skip_spaces(at);
    while j < bytes.len() && matches!(bytes[j], b'-' | b'+') {
        j = skip_spaces(j + 1);
    }
    let start = j;
    while j < bytes.len() && is_identifier_byte(bytes[j]) {
        j += 1;
    }
    let word = &bytes[start..j];
    let end = match bytes.get(j) {
        _ if matches!(word, b"None" | b"True" | b"False") => j,
        _ if word.first().map(|b| b.is_ascii_digit()).unwrap_or(false) => {
            // The rest of a number: `1e-5`, `0.5`, `1_000j`.
            while j < bytes.len() && (is_identifier_byte(bytes[j]) || bytes[j] == b'.' || (matches!(bytes[j], b'-' | b'+') && matches!(bytes[j - 1], b'e' | b'E'))) {
                j += 1;
            }
            j
        }
        Some(&quote @ (b'\'' | b'"')) if word.iter().all(|b| matches!(b, b'r' | b'R' | b'b' | b'B' | b'u' | b'U')) && word.len() <= 2 => {
            if bytes.get(j + 1) == Some(&quote) && bytes.get(j + 2) == Some(&quote) {
                return false; // triple-quoted: may span lines
            }
            j += 1;
            loop {
                match bytes.get(j) {
                    Some(b'\\') => j += 2,
                    Some(b'\n') | None => return false,
                    Some(b) if *b == quote => break j + 1,
                    Some(_) => j += 1,
                }
            }
        }
        _ => return false,
    };
    matches!(bytes.get(skip_spaces(end)), None | Some(b'\n' | b'\r' | b'#' | b';'))
}

/// Bytes that can be part of an identifier (ASCII letters, digits, `_`, any byte of a
/// multi-byte UTF-8 character), by table: the word scan asks for every byte.
const IDENTIFIER_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        b += 1;
    }
    table
};

fn is_identifier_byte(b: u8) -> bool {
    IDENTIFIER_BYTES[b as usize]
}

/// The end of the run of identifier bytes that starts at or before `i` (the first byte
/// from `i` on that is not one). Sixteen bytes at a time where SSE2 is there (every
/// x86-64): the word scans spend most of their time finding where words end.
pub(crate) fn identifier_end(bytes: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    while i + 16 <= bytes.len() {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86-64 baseline, and the unaligned load reads the
        // 16 bytes at `i..i + 16`, inside `bytes`.
        let identifier = unsafe {
            let v = _mm_loadu_si128(bytes.as_ptr().add(i) as *const __m128i);
            // Signed compares: bytes >= 0x80 are negative and fail every range below;
            // the sign bits themselves count (any byte of a non-ASCII character).
            let digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)));
            let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
            let letter = _mm_and_si128(_mm_cmpgt_epi8(folded, _mm_set1_epi8(b'a' as i8 - 1)), _mm_cmplt_epi8(folded, _mm_set1_epi8(b'z' as i8 + 1)));
            let underscore = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'_' as i8));
            let ascii = _mm_or_si128(_mm_or_si128(digit, letter), underscore);
            (_mm_movemask_epi8(ascii) | _mm_movemask_epi8(v)) as u32
        };
        let others = !identifier & 0xFFFF;
        if others != 0 {
            return i + others.trailing_zeros() as usize;
        }
        i += 16;
    }
    while i < bytes.len() && is_identifier_byte(bytes[i]) {
        i += 1;
    }
    i
}

/// Where the scan is in a loop header.
#[derive(Clone, Copy)]
struct Header {
    /// Bracket depth since the keyword.
    depth: i32,
    /// Inside a string literal: its quote byte and whether it is triple-quoted.
    string: Option<(u8, bool)>,
    /// The header's `:` was seen: words up to the end of its line still count, so a `:`
    /// that only looked like the end (in an f-string with nested quotes) loses nothing.
    ended: bool,
}

/// What a scan of source text reports, word by word: a body's [`Words`] keep every
/// word, a file's [`FileWords`] only what the file-level conditions ask for.
trait Sink<'a> {
    /// A word (a run of identifier bytes not starting with a digit) at `start..end`.
    fn word(&mut self, source: &'a str, start: usize, end: usize);
    /// A word of a comment inside a loop header.
    fn comment_word_in_header(&mut self, word: &'a str);
    fn header_word(&mut self, word: &'a str);
    fn function(&mut self, name: &'a str);
    fn class(&mut self, name: &'a str);
    fn renamed(&mut self, original: &'a str, alias: &'a str);
    fn train_false(&mut self);
    /// `load`, `backward`, `grad` or `step`, called or imported under another name.
    fn called(&mut self, word: &'a str);
}

/// Scans the words of `source` (which starts at byte `offset` of its file) outside the
/// `quiet` ranges of the file (sorted, not overlapping).
fn scan_words<'a>(source: &'a str, offset: usize, quiet: &[std::ops::Range<usize>], sink: &mut impl Sink<'a>) {
    let bytes = source.as_bytes();
    let mut quiet = &quiet[quiet.partition_point(|q| q.end <= offset)..];
    // A header starts at `for`/`while` and ends at a `:` at depth 0 outside strings
    // (not `:=`), or when a bracket closes below its depth (a comprehension's `for`).
    // Every word is collected everywhere (strings included), so a mistaken start only
    // adds header words.
    let mut header: Option<Header> = None;
    let mut after_def = false;
    let mut after_class = false;
    // The word before an `as`, while the `as` is the last word seen.
    let mut before_as: Option<&'a str> = None;
    let mut previous_word: Option<&'a str> = None;
    // Only whitespace (or `async`) so far on this line: a `for`/`while` statement
    // always starts its line, so the word in prose or a comprehension starts nothing.
    let mut at_line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(q) = quiet.first() {
            if q.start <= offset + i {
                i = i.max(q.end.saturating_sub(offset));
                quiet = &quiet[1..];
                continue;
            }
        }
        let b = bytes[i];
        if b == b' ' {
            // Spaces change no state of the scan (in a header or not).
            i += 1;
            continue;
        }
        if is_identifier_byte(b) && !b.is_ascii_digit() {
            let start = i;
            i = identifier_end(bytes, i);
            // Identifiers are ASCII or whole UTF-8 characters: the slice is on char boundaries.
            let Some(word) = source.get(start..i) else { continue };
            sink.word(source, start, i);
            if after_def {
                sink.function(word);
            }
            if after_class {
                sink.class(word);
            }
            after_def = word == "def";
            after_class = word == "class";
            if let Some(original) = before_as.take() {
                sink.renamed(original, word);
            }
            if word == "as" {
                before_as = previous_word;
            }
            previous_word = Some(word);
            if word == "train" && called_with_false(bytes, i) {
                sink.train_false();
            }
            if matches!(word, "load" | "backward" | "grad" | "step") && called_or_renamed(bytes, i) {
                sink.called(word);
            }
            match header {
                Some(_) => sink.header_word(word),
                None if at_line_start && (word == "for" || word == "while") => {
                    header = Some(Header { depth: 0, string: None, ended: false });
                }
                None => {}
            }
            at_line_start = at_line_start && word == "async";
            continue;
        }
        if b.is_ascii_digit() {
            i = identifier_end(bytes, i);
            at_line_start = false;
            continue;
        }
        if b == b'\n' {
            at_line_start = true;
        } else if !b.is_ascii_whitespace() {
            after_def = false;
            after_class = false;
            before_as = None;
            previous_word = None;
            at_line_start = false;
        }
        if let Some(h) = header.as_mut() {
            if h.ended {
                if b == b'\n' {
                    header = None;
                }
            } else if let Some((quote, triple)) = h.string {
                match b {
                    b'\\' => i += 1,
                    b'\n' if !triple => h.string = None,
                    _ if b == quote => {
                        if !triple {
                            h.string = None;
                        } else if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                            h.string = None;
                            i += 2;
                        }
                    }
                    _ => {}
                }
            } else {
                match b {
                    b'\'' | b'"' => {
                        let triple = bytes.get(i + 1) == Some(&b) && bytes.get(i + 2) == Some(&b);
                        h.string = Some((b, triple));
                        if triple {
                            i += 2;
                        }
                    }
                    // A comment: its words count, its brackets and colons do not.
                    b'#' => {
                        let end = memchr::memchr(b'\n', &bytes[i..]).map(|n| i + n).unwrap_or(bytes.len());
                        for word in source.get(i..end).unwrap_or("").split(|c: char| !c.is_alphanumeric() && c != '_') {
                            if !word.is_empty() {
                                sink.comment_word_in_header(word);
                            }
                        }
                        i = end;
                        continue;
                    }
                    b'(' | b'[' | b'{' => h.depth += 1,
                    b')' | b']' | b'}' => {
                        h.depth -= 1;
                        if h.depth < 0 {
                            header = None;
                        }
                    }
                    b':' if h.depth == 0 && bytes.get(i + 1) != Some(&b'=') => h.ended = true,
                    _ => {}
                }
            }
        }
        i += 1;
    }
}

impl<'a> Sink<'a> for Words<'a> {
    fn word(&mut self, source: &'a str, start: usize, end: usize) {
        let bytes = source.as_bytes();
        let word = &source[start..end];
        self.identifiers.insert(word);
        if word == "self" {
            let dot = skip_blank(bytes, end);
            if bytes.get(dot) == Some(&b'.') {
                note_self_attribute(source, start, dot + 1, self);
            }
        }
        if bytes.get(skip_blank(bytes, end)) == Some(&b'(') {
            self.calls.insert(word);
        }
        if self.collect_bare && !after_dot(bytes, start) {
            self.bare.insert(word);
        }
    }
    fn comment_word_in_header(&mut self, word: &'a str) {
        self.identifiers.insert(word);
        self.loop_header.insert(word);
    }
    fn header_word(&mut self, word: &'a str) {
        self.loop_header.insert(word);
    }
    fn function(&mut self, name: &'a str) {
        self.functions.push(name);
    }
    fn class(&mut self, name: &'a str) {
        self.classes.push(name);
    }
    fn renamed(&mut self, _original: &'a str, _alias: &'a str) {}
    fn train_false(&mut self) {
        self.train_false = true;
    }
    fn called(&mut self, word: &'a str) {
        self.called.insert(word);
    }
}

/// Does the word at `start` follow a `.` (an attribute, not a name)?
fn after_dot(bytes: &[u8], start: usize) -> bool {
    bytes[..start].iter().rev().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\\')) == Some(&b'.')
}

/// Collects only the bare words (see [`Words::bare`]).
struct BareWords<'w, 'a>(&'w mut FxHashSet<&'a str>);

impl<'a> Sink<'a> for BareWords<'_, 'a> {
    fn word(&mut self, source: &'a str, start: usize, end: usize) {
        if !after_dot(source.as_bytes(), start) {
            self.0.insert(&source[start..end]);
        }
    }
    fn comment_word_in_header(&mut self, _word: &'a str) {}
    fn header_word(&mut self, _word: &'a str) {}
    fn function(&mut self, _name: &'a str) {}
    fn class(&mut self, _name: &'a str) {}
    fn renamed(&mut self, _original: &'a str, _alias: &'a str) {}
    fn train_false(&mut self) {}
    fn called(&mut self, _word: &'a str) {}
}

impl<'a> Words<'a> {
    /// The words of a function body ([`Words::scan_except`] without the bare words).
    pub(crate) fn scan_body(source: &'a str, offset: usize, quiet: &[std::ops::Range<usize>]) -> Self {
        Self::scan(source, offset, quiet, false)
    }

    /// Adds the bare words of `source` (the text this was scanned from).
    pub(crate) fn collect_bare(&mut self, source: &'a str, offset: usize, quiet: &[std::ops::Range<usize>]) {
        if !self.collect_bare {
            scan_words(source, offset, quiet, &mut BareWords(&mut self.bare));
            self.collect_bare = true;
        }
    }

    /// The words of `source` (which starts at byte `offset` of its file) outside the
    /// `quiet` ranges of the file (sorted, not overlapping).
    pub(crate) fn scan_except(source: &'a str, offset: usize, quiet: &[std::ops::Range<usize>]) -> Self {
        Self::scan(source, offset, quiet, true)
    }

    fn scan(source: &'a str, offset: usize, quiet: &[std::ops::Range<usize>], collect_bare: bool) -> Self {
        let mut words = Words {
            identifiers: FxHashSet::with_capacity_and_hasher(source.len() / 48, Default::default()),
            loop_header: FxHashSet::default(),
            functions: Vec::new(),
            classes: Vec::new(),
            train_false: false,
            called: FxHashSet::default(),
            self_assigned: FxHashSet::default(),
            self_attributes: FxHashSet::default(),
            calls: FxHashSet::default(),
            bare: FxHashSet::default(),
            collect_bare,
        };
        scan_words(source, offset, quiet, &mut words);
        words
    }

    pub(crate) fn has(&self, word: &str) -> bool {
        self.identifiers.contains(word)
    }

    /// Is there a `for` or `while` statement (its header has words)?
    fn has_loop(&self) -> bool {
        !self.loop_header.is_empty()
    }

    /// Could a loop go over evaluation data?
    fn loops_over_evaluation_data(&self) -> bool {
        loops_over_evaluation_data(self.loop_header.iter().copied())
    }

    /// Could `backward()` or `torch.autograd.grad` be called?
    pub(crate) fn mentions_backward(&self) -> bool {
        self.called.contains("backward") || self.called.contains("grad")
    }

    /// Could an optimizer (or a `GradScaler`) be stepped: `.step()` called, and a name
    /// with `opt` or `scaler` in it?
    fn mentions_optimizer_step(&self) -> bool {
        self.called.contains("step") && self.identifiers.iter().any(|w| name_says_optimizer(w))
    }

    /// Could a loop go over batches: data in a loop header, or a backward pass or an
    /// optimizer step somewhere?
    fn mentions_batches(&self) -> bool {
        self.loop_header.iter().any(|w| name_says_data(w)) || self.mentions_backward() || self.mentions_optimizer_step()
    }
}

/// Data and validation or test words in a loop header's words.
fn loops_over_evaluation_data<'w>(header: impl Iterator<Item = &'w str> + Clone) -> bool {
    header.clone().any(name_says_data) && header.into_iter().any(|w| name_says_eval(w) || w.contains("val") || w.contains("test"))
}

/// The words the file-level conditions ask for by name ([`FileWords::has`]), each with
/// its bit (a `match`: a few compares, no hashing).
fn known_word(word: &str) -> Option<u32> {
    Some(match word {
        "eval" => 0,
        "append" => 1,
        "retain_graph" => 2,
        "DataParallel" => 3,
        "data_parallel" => 4,
        "zero_grad" => 5,
        "amp" => 6,
        "Module" => 8,
        "LightningModule" => 9,
        "forward" => 10,
        "requires_grad_" => 11,
        "nn" => 12,
        "torchvision" => 13,
        "timm" => 14,
        "transformers" => 15,
        _ => return None,
    })
}

/// The words of a whole file, as far as the file-level conditions ask: which of
/// [`known_word`]s occur, loop headers, `def` names, calls of `load`/`backward`/`grad`,
/// renames. Every file is scanned, and most go no further: hashing each of a file's
/// words into a set cost as much as the rest of the scan, so a file's words are not
/// collected; names that say model, loss or optimizer are searched for when asked.
pub(crate) struct FileWords<'a> {
    source: &'a str,
    /// Bit `known_word(w)`: `w` occurs as a word.
    known: u32,
    /// Words in loop headers (with repeats).
    loop_header: Vec<&'a str>,
    /// Names of `def`s.
    functions: Vec<&'a str>,
    train_false: bool,
    /// `load`, `backward`, `grad`, `step` called (or imported under another name).
    called: [bool; 4],
    /// `X as Y` pairs.
    pub(crate) renamed: Vec<(&'a str, &'a str)>,
    names_a_model: std::cell::OnceCell<bool>,
    names_an_optimizer: std::cell::OnceCell<bool>,
}

impl<'a> Sink<'a> for FileWords<'a> {
    fn word(&mut self, source: &'a str, start: usize, end: usize) {
        if let Some(k) = known_word(&source[start..end]) {
            self.known |= 1 << k;
        }
    }
    fn comment_word_in_header(&mut self, word: &'a str) {
        if let Some(k) = known_word(word) {
            self.known |= 1 << k;
        }
        self.loop_header.push(word);
    }
    fn header_word(&mut self, word: &'a str) {
        self.loop_header.push(word);
    }
    fn function(&mut self, name: &'a str) {
        self.functions.push(name);
    }
    fn class(&mut self, _name: &'a str) {}
    fn renamed(&mut self, original: &'a str, alias: &'a str) {
        self.renamed.push((original, alias));
    }
    fn train_false(&mut self) {
        self.train_false = true;
    }
    fn called(&mut self, word: &'a str) {
        match word {
            "load" => self.called[0] = true,
            "backward" => self.called[1] = true,
            "grad" => self.called[2] = true,
            _ => self.called[3] = true,
        }
    }
}

impl<'a> FileWords<'a> {
    fn empty(source: &'a str) -> Self {
        FileWords {
            source,
            known: 0,
            loop_header: Vec::new(),
            functions: Vec::new(),
            train_false: false,
            called: [false; 4],
            renamed: Vec::new(),
            names_a_model: std::cell::OnceCell::new(),
            names_an_optimizer: std::cell::OnceCell::new(),
        }
    }

    /// Scans `source` for the words the file-level conditions ask for.
    pub(crate) fn scan(source: &'a str) -> Self {
        let mut words = FileWords::empty(source);
        scan_words(source, 0, &[], &mut words);
        words
    }

    /// Does `word`, a [`known_word`], occur as a word? (Any other word might.)
    fn has(&self, word: &str) -> bool {
        debug_assert!(known_word(word).is_some(), "{word} is not a known word");
        known_word(word).map(|k| self.known & (1 << k) != 0).unwrap_or(true)
    }

    /// Is `load`, `backward`, `grad` or `step` called (or imported under another name)?
    fn called(&self, word: &str) -> bool {
        match word {
            "load" => self.called[0],
            "backward" => self.called[1],
            "grad" => self.called[2],
            "step" => self.called[3],
            _ => true,
        }
    }

    /// Could some name in the file hold a model, a loss, or a tensor with history?
    fn mentions_a_model(&self) -> bool {
        MODULE_TOKENS.iter().any(|t| self.has(t))
            || *self.names_a_model.get_or_init(|| memlint_python::text_names_a_model_or_loss(self.source))
    }

    /// Could some code be evaluation code: a function named for evaluation, a loop over
    /// validation or test data, `.eval()`, or `.train(False)`?
    fn mentions_evaluation(&self) -> bool {
        self.has("eval")
            || self.train_false
            || self.functions.iter().any(|f| function_name_says_eval(f))
            || loops_over_evaluation_data(self.loop_header.iter().copied())
    }

    /// Could `backward()` or `torch.autograd.grad` be called?
    fn mentions_backward(&self) -> bool {
        self.called("backward") || self.called("grad")
    }

    /// Could an optimizer (or a `GradScaler`) be stepped: `.step()` called, and a name
    /// with `opt` or `scaler` in it?
    fn mentions_optimizer_step(&self) -> bool {
        self.called("step") && *self.names_an_optimizer.get_or_init(|| memlint_python::text_names_an_optimizer(self.source))
    }

    /// Could a loop go over batches: data in a loop header, or a backward pass or an
    /// optimizer step somewhere?
    fn mentions_batches(&self) -> bool {
        self.loop_header.iter().any(|w| name_says_data(w)) || self.mentions_backward() || self.mentions_optimizer_step()
    }
}

/// Does the body mention `word`, or a name some import in the file gives it (`ec` after
/// `from torch.cuda import empty_cache as ec`)?
fn mentions_or_alias(body: &Words<'_>, file: &FileWords<'_>, word: &str) -> bool {
    body.has(word) || file.renamed.iter().any(|(original, alias)| *original == word && body.has(alias))
}

/// Does the body call `word`, or a name some import in the file gives it? (Only for
/// words of a body: `calls` is collected by [`Words::scan_except`].)
fn calls_or_alias(body: &Words<'_>, file: &FileWords<'_>, word: &str) -> bool {
    body.calls.contains(word) || file.renamed.iter().any(|(original, alias)| *original == word && body.calls.contains(alias))
}

/// Could `text` assign to a subscript (`x[i] = t`, `x[i]: T = t`): a `]` followed by `=`
/// (not `==`) or `:`, across whitespace and comments?
fn may_assign_subscript(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b']', bytes).any(|at| {
        let next = skip_blank(bytes, at + 1);
        match bytes.get(next) {
            Some(b'=') => bytes.get(next + 1) != Some(&b'='),
            Some(b':') => true,
            _ => false,
        }
    })
}

/// Must a function body be parsed for `rule`: could the rule report something in it, or
/// does the rule read something in it while checking other code? `name` is the
/// function's name, `body` the body's words, `file` the whole file's. `None` for a rule
/// whose findings depend on other functions in ways this does not follow (every use of a
/// pretrained network in the module): with it enabled, no body is skipped.
pub(crate) fn body_matters(rule: Rule, body: &Words<'_>, body_text: &str, name: &str, file: &FileWords<'_>) -> Option<bool> {
    Some(match rule {
        // An evaluation region is a function named for evaluation, a loop over evaluation
        // data, or the code after `.eval()` / `.train(False)` in the same function.
        // (`.eval()` and `.train(False)` count when called: `.train()` only ends a region.)
        Rule::EvalWithoutNoGrad => {
            function_name_says_eval(name)
                || body.has("volatile")
                || body.calls.contains("eval")
                || body.train_false
                || body.functions.iter().any(|f| function_name_says_eval(f))
                || body.loops_over_evaluation_data()
        }
        // The accumulation and the loop over batches it survives are in the same function.
        Rule::AccumulatedLossTensor => {
            (contains(body_text, "+") || body.calls.contains("append")) && body.has_loop() && body.mentions_batches()
        }
        // `x.append(t)` or `x[i] = t` in a loop over batches, in the same function.
        Rule::GpuTensorsCollected => {
            (body.calls.contains("append") || may_assign_subscript(body_text)) && body.has_loop() && body.mentions_batches()
        }
        // Conversions and autocasts are reported where they are; any `backward()` and any
        // loss scaling in the module decide whether they are.
        Rule::HalfWithoutGradScaler => {
            ["half", "float16", "autocast"].iter().any(|w| mentions_or_alias(body, file, w))
                || body.called.contains("backward")
                || ["GradScaler", "ShardedGradScaler", "scale_loss", "scale"].iter().any(|w| body.has(w))
        }
        Rule::EmptyCacheInLoop => mentions_or_alias(body, file, "empty_cache"),
        Rule::RetainGraphInLoop => body.has("retain_graph"),
        Rule::DataParallel => mentions_or_alias(body, file, "DataParallel") || mentions_or_alias(body, file, "data_parallel"),
        // The rule reports calls of `load` or of a name an import gives it.
        Rule::TorchLoadWithoutMapLocation => calls_or_alias(body, file, "load"),
        Rule::ZeroGradKeepsMemory => body.has("zero_grad"),
        // The deprecated names end in `autocast` / `GradScaler`; calls that change autocast
        // defaults anywhere make the fix unsafe.
        Rule::DeprecatedCudaAmp => {
            mentions_or_alias(body, file, "autocast")
                || mentions_or_alias(body, file, "GradScaler")
                || ["set_autocast_dtype", "set_autocast_gpu_dtype", "set_autocast_cache_enabled"].iter().any(|w| body.has(w))
        }
        // The backward, the guarded step and the loss are in the same loop.
        Rule::AccumulationWithoutLossDivision => {
            contains(body_text, "%") && body.mentions_backward() && body.mentions_optimizer_step()
        }
        Rule::FrozenNetworkTracksGrad => return None,
    })
}

/// Where the lines of a file went (for `examples/prefilter_stats.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    /// Lines of files no enabled rule could fire in: not parsed.
    pub skipped_file: usize,
    /// Lines parsed whole (the outline scan gave up, a rule allows no skipping, or the
    /// blanked file did not parse as expected).
    pub whole_file: usize,
    /// Lines outside function bodies (module level, class bodies, `def` headers).
    pub between_bodies: usize,
    /// Body lines kept because a rule could report there.
    pub kept_could_report: usize,
    /// Body lines kept because they may call such a function.
    pub kept_calls: usize,
    /// Body lines kept because they define or assign what kept code names.
    pub kept_provides: usize,
    /// Body lines blanked.
    pub blanked: usize,
    /// Lines of docstrings left out (outside blanked bodies).
    pub docstrings: usize,
    /// Lines of assignments at module level or in class bodies left out.
    pub assignments: usize,
}

impl LineStats {
    /// The count of body lines kept for `why` (`None`: not kept).
    fn kept_lines(&mut self, why: Option<crate::skip::Kept>) -> Option<&mut usize> {
        use crate::skip::Kept;
        match why? {
            Kept::Matters => Some(&mut self.kept_could_report),
            Kept::Calls => Some(&mut self.kept_calls),
            Kept::Provides => Some(&mut self.kept_provides),
        }
    }
}

impl std::ops::AddAssign for LineStats {
    fn add_assign(&mut self, o: Self) {
        self.skipped_file += o.skipped_file;
        self.whole_file += o.whole_file;
        self.between_bodies += o.between_bodies;
        self.kept_could_report += o.kept_could_report;
        self.kept_calls += o.kept_calls;
        self.kept_provides += o.kept_provides;
        self.blanked += o.blanked;
        self.docstrings += o.docstrings;
        self.assignments += o.assignments;
    }
}

/// What [`crate::lint`] parses of `source` when it leaves function bodies out: the text
/// with everything left out turned to spaces (newlines kept). `None` when it parses the
/// file whole or not at all.
pub fn text_to_parse(source: &str, enabled: &RuleSelection) -> Option<String> {
    let words = FileWords::scan(source);
    let possible = possible_rules(source, &words, enabled);
    if !possible.any_enabled() {
        return None;
    }
    let blanked = crate::skip::blank_irrelevant_bodies(source, &words, &possible)?;
    let mut bytes = blanked.source.into_bytes();
    let mut start = 0;
    for included in blanked.included.iter().chain(std::iter::once(&(bytes.len()..bytes.len()))) {
        for b in &mut bytes[start..included.start] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        start = included.end;
    }
    String::from_utf8(bytes).ok()
}

/// Where [`crate::lint`]'s parsing effort on `source` goes, by line.
pub fn line_stats(source: &str, enabled: &RuleSelection) -> LineStats {
    use crate::skip::{blank_irrelevant_bodies, decide, parsed_as_blanked};
    let lines = source.lines().count();
    let words = FileWords::scan(source);
    let possible = possible_rules(source, &words, enabled);
    if !possible.any_enabled() {
        return LineStats { skipped_file: lines, ..LineStats::default() };
    }
    let whole = LineStats { whole_file: lines, ..LineStats::default() };
    let Some(blanked) = blank_irrelevant_bodies(source, &words, &possible) else { return whole };
    if !blanked.parse().map(|t| parsed_as_blanked(&t, &blanked)).unwrap_or(false) {
        return whole;
    }
    let mut stats = LineStats { between_bodies: lines, ..LineStats::default() };
    let candidates = decide(source, &words, &possible).expect("decided before").candidates;
    for c in &candidates {
        // The line of the `0` stays; the other lines are counted where they went.
        let from = if c.whole { c.body.outer_start } else { c.body.range.start };
        let n = source[from..c.body.range.end].lines().count().saturating_sub(1);
        stats.between_bodies -= n;
        match stats.kept_lines(c.kept) {
            Some(kept) => *kept += n,
            None => stats.blanked += n,
        }
    }
    for l in blanked.bodies.iter().filter(|l| l.kind == crate::skip::Stand::String) {
        let n = source[l.range.clone()].lines().count().saturating_sub(1);
        stats.docstrings += n;
        let inside = candidates.iter().find(|c| c.body.range.start <= l.range.start && l.range.end <= c.body.range.end);
        match inside.and_then(|c| stats.kept_lines(c.kept)) {
            Some(kept) => *kept -= n,
            None => stats.between_bodies -= n,
        }
    }
    for l in blanked.bodies.iter().filter(|l| l.kind == crate::skip::Stand::Statement) {
        // The line of the `0` stays.
        let n = source[l.range.clone()].lines().count().saturating_sub(1);
        stats.assignments += n;
        stats.between_bodies -= n;
    }
    stats
}

fn contains(source: &str, word: &str) -> bool {
    memchr::memmem::find(source.as_bytes(), word.as_bytes()).is_some()
}

/// The enabled rules that could report something in `source`.
pub fn rules_that_could_fire(source: &str, enabled: &RuleSelection) -> RuleSelection {
    possible_rules(source, &FileWords::scan(source), enabled)
}

/// [`rules_that_could_fire`] with the file's words already scanned.
pub(crate) fn possible_rules(source: &str, words: &FileWords<'_>, enabled: &RuleSelection) -> RuleSelection {
    let mut selection = RuleSelection::none();
    for rule in enabled.iter() {
        let possible = match rule {
            Rule::EvalWithoutNoGrad => contains(source, "volatile") || (words.mentions_evaluation() && words.mentions_a_model()),
            Rule::AccumulatedLossTensor => {
                (contains(source, "+") || words.has("append")) && words.mentions_batches() && words.mentions_a_model()
            }
            // The rule needs a `backward()` call in the module.
            Rule::HalfWithoutGradScaler => {
                words.called("backward") && ["half", "float16", "autocast"].iter().any(|w| contains(source, w))
            }
            Rule::EmptyCacheInLoop => contains(source, "empty_cache"),
            Rule::RetainGraphInLoop => words.has("retain_graph"),
            Rule::GpuTensorsCollected => words.mentions_batches(),
            Rule::DataParallel => words.has("DataParallel") || words.has("data_parallel"),
            Rule::TorchLoadWithoutMapLocation => words.called("load"),
            Rule::ZeroGradKeepsMemory => words.has("zero_grad"),
            Rule::DeprecatedCudaAmp => words.has("amp"),
            Rule::AccumulationWithoutLossDivision => {
                contains(source, "%") && words.mentions_backward() && words.mentions_optimizer_step()
            }
            Rule::FrozenNetworkTracksGrad => {
                ["from_pretrained", "torchvision", "timm", "hub"].iter().any(|w| contains(source, w)) && words.mentions_backward()
            }
        };
        if possible {
            selection.enable(rule);
        }
    }
    selection
}

#[cfg(test)]
mod tests {
    use super::{FileWords, Words};

    fn header(source: &str) -> Vec<&str> {
        let mut words: Vec<&str> = FileWords::scan(source).loop_header;
        words.sort();
        words.dedup();
        let mut body: Vec<&str> = Words::scan_except(source, 0, &[]).loop_header.into_iter().collect();
        body.sort();
        assert_eq!(words, body, "a file's and a body's scan see the same headers");
        words
    }

    #[test]
    fn loop_headers_end_at_their_colon() {
        assert_eq!(header("for x in val_loader:\n    y = model(x)\n"), ["in", "val_loader", "x"]);
        assert_eq!(header("while (n := read()) > 0:\n    total = n\n"), ["n", "read"]);
        assert_eq!(header("while n := read():\n    go()\n"), ["n", "read"]);
    }

    #[test]
    fn colons_in_strings_comments_and_brackets_do_not_end_a_header() {
        assert_eq!(header("for x in d[\"a:b\"].loader:\n    pass\n"), ["a", "b", "d", "in", "loader", "x"]);
        assert_eq!(header("for x in (a,  # note: here\n         test_data):\n    pass\n"), ["a", "here", "in", "note", "test_data", "x"]);
        assert_eq!(header("for k in {1: 2}.keys():\n    pass\n"), ["in", "k", "keys"]);
    }

    #[test]
    fn words_after_the_colon_on_its_line_count() {
        assert_eq!(header("for x in xs: preds.append(x)\ny = 1\n"), ["append", "in", "preds", "x", "xs"]);
    }

    #[test]
    fn for_in_prose_starts_no_header() {
        assert_eq!(header("x = 1  # for this loader: see\n\"\"\"Runs for each dataset: fast\"\"\"\n"), Vec::<&str>::new());
        assert_eq!(header("async for x in stream:\n    pass\n"), ["in", "stream", "x"]);
    }

    #[test]
    fn calls_through_spaces_comments_and_aliases() {
        let words = FileWords::scan("x = torch.load (f)\ny = (loss.backward  # c\n  ())\ngrad = p.grad\n");
        assert!(words.called("load") && words.called("backward") && !words.called("grad"));
        assert!(FileWords::scan("from torch.autograd import grad as g\n").called("grad"));
    }

    #[test]
    fn train_false_with_any_spacing() {
        assert!(FileWords::scan("model.train( \n False)").train_false);
        assert!(!FileWords::scan("model.train(Falsehood)").train_false);
        assert!(!FileWords::scan("model.train()\nx = False").train_false);
    }

    #[test]
    fn assigning_a_constant_to_self_does_not_count() {
        fn assigned(source: &str) -> Vec<&str> {
            let mut names: Vec<&str> = Words::scan_body(source, 0, &[]).self_assigned.into_iter().collect();
            names.sort();
            names
        }
        assert_eq!(assigned("self.a = None\nself.b = -1e-5  # eps\nself.c = 'x'; self.d = rb\"y\"\n"), Vec::<&str>::new());
        assert_eq!(assigned("self.a = None if m else self.m\nself.b = f'{g()}'\nself.c = '''x'''\nself.d = 1 + x\n"), ["a", "b", "c", "d"]);
        assert_eq!(assigned("self.a = 0 \\\n    or model\nself.b = True\n"), ["a"]);
        assert_eq!(assigned("self.a = b = Net()\nself.c = config\n"), ["a", "c"]);
    }

    #[test]
    fn identifier_ends_agree_with_the_byte_table() {
        let text = "self.encoder_layer_17(x) + émbed_ünicode__name_that_is_longer_than_sixteen[0]\tnext_0123456789abcdefXYZ_ end";
        let bytes = text.as_bytes();
        for start in 0..bytes.len() {
            let slow = start + bytes[start..].iter().take_while(|b| super::is_identifier_byte(**b)).count();
            assert_eq!(super::identifier_end(bytes, start), slow, "from {start}");
        }
        for b in 0..=255u8 {
            let bytes = [b'a', b'b', b, b'c', b'd', b'e', b'f', b'g', b'h', b'i', b'j', b'k', b'l', b'm', b'n', b'o', b'p', b'q'];
            let slow = bytes.iter().take_while(|c| super::is_identifier_byte(**c)).count();
            assert_eq!(super::identifier_end(&bytes, 0), slow, "byte {b}");
        }
    }

    #[test]
    fn known_words_have_their_own_bits() {
        let words = ["eval", "append", "retain_graph", "DataParallel", "data_parallel", "zero_grad", "amp"];
        let bits: Vec<u32> = words.iter().chain(super::MODULE_TOKENS).map(|w| super::known_word(w).expect("known")).collect();
        let mut unique = bits.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), bits.len());
        assert!(bits.iter().all(|b| *b < 32));
    }

    #[test]
    fn a_file_has_its_known_words_only_as_whole_words() {
        let file = FileWords::scan("x = evaluation(model.forward)  # nn\nstep_size = 1\nopt.step\n");
        assert!(file.has("forward") && file.has("nn"));
        assert!(!file.has("eval") && !file.called("step"));
        assert!(FileWords::scan("opt.step ()\n").called("step"));
    }

    #[test]
    fn a_file_names_a_model_in_any_word() {
        assert!(FileWords::scan("x = 1  # the G_net here\n").mentions_a_model());
        assert!(FileWords::scan("y = self.backbone(x)\n").mentions_a_model());
        assert!(!FileWords::scan("cfg = model_config\nget_model()\n").mentions_a_model());
        // The Kelvin sign's lower case is `k`: `BAC\u{212a}BONE` says backbone.
        assert!(FileWords::scan("y = BAC\u{212a}BONE(x)\n").mentions_a_model());
    }

    #[test]
    fn subscript_assignments_across_spaces_and_annotations() {
        use super::may_assign_subscript;
        assert!(may_assign_subscript("preds[i] = out"));
        assert!(may_assign_subscript("buf[i]=out"));
        assert!(may_assign_subscript("buf[i]  # c\n  : Tensor = out"));
        assert!(!may_assign_subscript("if preds[i] == out: pass"));
        assert!(!may_assign_subscript("x = preds[i]\ny = [1]"));
    }

    #[test]
    fn a_loop_is_a_for_or_while_statement_not_a_comprehension() {
        assert!(Words::scan_except("for x in xs:\n    pass\n", 0, &[]).has_loop());
        assert!(Words::scan_except("while go():\n    pass\n", 0, &[]).has_loop());
        assert!(!Words::scan_except("ys = [f(x) for x in xs]\n", 0, &[]).has_loop());
    }

    #[test]
    fn calls_through_an_imported_alias() {
        let file = FileWords::scan("from torch import load as torch_load\n");
        assert!(super::calls_or_alias(&Words::scan_except("torch_load(f)", 0, &[]), &file, "load"));
        assert!(!super::calls_or_alias(&Words::scan_except("self.load_state = torch_load", 0, &[]), &file, "load"));
    }

    #[test]
    fn a_comprehension_header_ends_with_its_bracket() {
        assert_eq!(header("ys = [f(x)\n      for x in xs]\nz = after\n"), ["in", "x", "xs"]);
    }
}
