//! The pre-filter: parsing is memlint's main cost, so a file is parsed only when some
//! enabled rule's *trigger* holds for it. A trigger is a necessary condition over the
//! words of a file, declared by each rule in its own file (`pub fn trigger`); this module
//! only scans the words once and asks the enabled rules. It knows no rule.
//!
//! Soundness (a trigger never drops a finding) is checked by `tests/engine.rs`: every
//! fixture, example and a property test over random programs lint the same with and
//! without the pre-filter.

use rustc_hash::FxHashSet;

use crate::RuleSelection;

/// The words of a file, scanned once: what triggers ask about.
///
/// Words are collected everywhere, strings and comments included: a trigger may only
/// ask whether something *could* be there, so seeing more is always sound.
pub struct Words<'a> {
    text: &'a str,
    identifiers: FxHashSet<&'a str>,
    /// Identifiers followed by `(` (called), or renamed by an import (`x as y`: the new
    /// name may be called instead).
    called: FxHashSet<&'a str>,
    /// Identifiers in `for`/`while` headers (target, iterable, condition).
    loop_header: FxHashSet<&'a str>,
    /// The name after each `def`.
    defs: Vec<&'a str>,
    /// The file uses a name imported from its project that can make a value a network or
    /// an accumulator (set by the linter after asking the project; see `lint_in_project`).
    project_values: bool,
}

fn is_identifier_byte(b: u8) -> bool {
    memlint_python::IDENTIFIER_BYTE[b as usize]
}

/// The last identifier met in each of 256 slots (chosen by its length and its first and
/// last bytes). Most identifiers of a file repeat (`self`, `torch`, `x`): a repeat found
/// here is already in the set, and skips hashing and probing it (which was over half of
/// the scan).
struct RecentWords<'a>([&'a str; 256]);

impl<'a> RecentWords<'a> {
    /// Was `word` (not empty) the last word of its slot? Makes it so either way.
    fn seen_again(&mut self, word: &'a str) -> bool {
        let bytes = word.as_bytes();
        let slot = (bytes.len().wrapping_mul(31) ^ ((bytes[0] as usize) << 3) ^ bytes[bytes.len() - 1] as usize) & 255;
        if self.0[slot] == word {
            return true;
        }
        self.0[slot] = word;
        false
    }
}

/// The index of the first byte at or after `j` that is not blank (spaces, line breaks,
/// backslash continuations).
fn skip_blank(bytes: &[u8], mut j: usize) -> usize {
    while j < bytes.len() && matches!(bytes[j], b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' | b'\\') {
        j += 1;
    }
    j
}

impl<'a> Words<'a> {
    /// Scans `text` once.
    pub fn scan(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut words = Words {
            text,
            identifiers: FxHashSet::default(),
            called: FxHashSet::default(),
            loop_header: FxHashSet::default(),
            defs: Vec::new(),
            project_values: false,
        };
        // A loop header runs from `for`/`while` to a `:` outside brackets and strings.
        let mut header_depth: Option<i32> = None;
        let mut quote: Option<u8> = None;
        let mut after_def = false;
        let mut recent = RecentWords([""; 256]);
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if let Some(q) = quote {
                // Inside a string of a loop header: only its end matters.
                if b == b'\\' {
                    i += 2;
                    continue;
                }
                if b == q || b == b'\n' {
                    quote = None;
                }
                i += 1;
                continue;
            }
            if is_identifier_byte(b) {
                let start = i;
                while i < bytes.len() && is_identifier_byte(bytes[i]) {
                    i += 1;
                }
                if b.is_ascii_digit() {
                    continue;
                }
                // Byte boundaries are char boundaries: non-ASCII bytes are all taken.
                let word = &text[start..i];
                if !recent.seen_again(word) {
                    words.identifiers.insert(word);
                }
                let next = skip_blank(bytes, i);
                let renamed = bytes[next..].starts_with(b"as") && !bytes.get(next + 2).copied().is_some_and(is_identifier_byte);
                if bytes.get(next) == Some(&b'(') || renamed {
                    words.called.insert(word);
                }
                if after_def {
                    words.defs.push(word);
                    after_def = false;
                }
                match word {
                    "for" | "while" => header_depth = Some(0),
                    "def" => after_def = true,
                    _ => {
                        if header_depth.is_some() {
                            words.loop_header.insert(word);
                        }
                    }
                }
                continue;
            }
            if let Some(depth) = header_depth.as_mut() {
                match b {
                    b'(' | b'[' | b'{' => *depth += 1,
                    b')' | b']' | b'}' => {
                        *depth -= 1;
                        if *depth < 0 {
                            // A comprehension's `for` ends with its bracket.
                            header_depth = None;
                        }
                    }
                    b':' if *depth == 0 && bytes.get(i + 1) != Some(&b'=') => header_depth = None,
                    b'\'' | b'"' => quote = Some(b),
                    b'\n' if *depth == 0 && i > 0 && bytes[i - 1] != b'\\' => header_depth = None,
                    _ => {}
                }
            }
            i += 1;
        }
        words
    }

    /// The text the words come from.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Does `needle` occur anywhere in the text?
    pub fn contains(&self, needle: &str) -> bool {
        memchr::memmem::find(self.text.as_bytes(), needle.as_bytes()).is_some()
    }

    /// Is `word` an identifier (or keyword) of the text?
    pub fn has(&self, word: &str) -> bool {
        self.identifiers.contains(word)
    }

    /// Is `word` called somewhere (`word(`), or renamed by an import (`word as x`)?
    pub fn called(&self, word: &str) -> bool {
        self.called.contains(word)
    }

    /// Does some identifier satisfy `predicate`?
    pub fn any(&self, predicate: impl Fn(&str) -> bool) -> bool {
        self.identifiers.iter().any(|w| predicate(w))
    }

    /// Is there a `for` or `while` loop?
    pub fn has_loop(&self) -> bool {
        self.has("for") || self.has("while")
    }

    /// Does some identifier of a loop header satisfy `predicate`?
    pub fn any_in_loop_header(&self, predicate: impl Fn(&str) -> bool) -> bool {
        self.loop_header.iter().any(|w| predicate(w))
    }

    /// The names of the `def`s.
    pub fn defs(&self) -> &[&'a str] {
        &self.defs
    }

    /// Could a name imported from the project hold a network, or a call of one store its
    /// argument beyond the call (a class or factory of a sibling module)? Triggers that
    /// ask whether something could be a network (or accumulate) must accept this too.
    pub fn project_values(&self) -> bool {
        self.project_values
    }

    /// Says whether the file may take such values from its project.
    pub fn set_project_values(&mut self, may: bool) {
        self.project_values = may;
    }
}

/// The enabled rules whose trigger holds for `source`.
pub fn rules_that_could_fire(source: &str, enabled: &RuleSelection) -> RuleSelection {
    possible_rules(&Words::scan(source), enabled)
}

/// [`rules_that_could_fire`] with the words already scanned.
pub fn possible_rules(words: &Words<'_>, enabled: &RuleSelection) -> RuleSelection {
    let mut selection = RuleSelection::none();
    for rule in enabled.iter() {
        if rule.trigger(words) {
            selection.enable(rule);
        }
    }
    selection
}

#[cfg(test)]
mod tests {
    use super::Words;

    /// Words that share a slot of the recent words (same length, first and last bytes),
    /// met in turn and again: each is an identifier of the text, and no other is.
    #[test]
    fn every_word_is_kept_whatever_words_share_its_slot() {
        let text = "axb ayb axb azb ayb self self axb\nqq = ayb(azb)\n";
        let w = Words::scan(text);
        for word in ["axb", "ayb", "azb", "self", "qq"] {
            assert!(w.has(word), "{word}");
        }
        let all = std::cell::RefCell::new(Vec::new());
        assert!(!w.any(|x| {
            all.borrow_mut().push(x.to_owned());
            false
        }));
        let mut all = all.into_inner();
        all.sort();
        assert_eq!(all, ["axb", "ayb", "azb", "qq", "self"]);
        assert!(w.called("ayb") && !w.called("azb"));
    }

    #[test]
    fn words_calls_and_renames() {
        let w = Words::scan("from torch.cuda import empty_cache as ec\nx = torch.load (p)\ny.backward()\n");
        assert!(w.has("empty_cache") && w.has("ec"));
        assert!(w.called("empty_cache"), "renamed counts as called");
        assert!(w.called("load") && w.called("backward"));
        assert!(!w.called("x") && !w.called("torch"));
    }

    #[test]
    fn loop_headers_end_at_their_colon() {
        let w = Words::scan("for i, (x, y) in enumerate(val_loader):\n    out = net(x)\nwhile step < n_steps:\n    pass\n");
        assert!(w.any_in_loop_header(|h| h == "val_loader"));
        assert!(w.any_in_loop_header(|h| h == "n_steps"));
        assert!(!w.any_in_loop_header(|h| h == "net" || h == "out"));
    }

    #[test]
    fn comprehension_headers_end_with_their_bracket() {
        let w = Words::scan("ys = [f(x) for x in xs]\nz = g(q)\n");
        assert!(w.any_in_loop_header(|h| h == "xs"));
        assert!(!w.any_in_loop_header(|h| h == "g" || h == "q"));
    }

    #[test]
    fn strings_in_headers_do_not_end_them() {
        let w = Words::scan("for x in load('a:b', data_loader):\n    pass\n");
        assert!(w.any_in_loop_header(|h| h == "data_loader"));
    }

    #[test]
    fn defs_and_non_ascii() {
        let w = Words::scan("def évaluer(modèle):\n    return modèle(x)\ndef validate(m): pass\n");
        assert_eq!(w.defs(), &["évaluer", "validate"]);
        assert!(w.called("modèle"));
    }

    #[test]
    fn digits_do_not_start_words() {
        let w = Words::scan("x = 1e5 + 0x1f\n");
        assert!(!w.has("e5") && !w.has("x1f"));
    }
}
