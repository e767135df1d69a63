//! The byte-level pre-filter: parsing is memlint's main cost, so a file is parsed only
//! when some enabled rule could fire in it. Each rule here has a *necessary* condition on
//! the file's words (identifiers, and the identifiers in `for`/`while` headers); the
//! tests `prefilter_is_sound` (property test) and `prefilter_keeps_every_fixture_finding`
//! check that filtering never changes what is reported.

use rustc_hash::FxHashSet;

use memlint_python::{function_name_says_eval, name_says_data, name_says_eval, name_says_loss, name_says_model, name_says_optimizer};

use crate::{Rule, RuleSelection};

/// Identifiers whose presence can make a value a model or a tensor with history without
/// the name saying so: module classes, `forward`, `torch.nn` constructors, model zoos.
const MODULE_TOKENS: &[&str] = &[
    "Module", "LightningModule", "forward", "requires_grad_", "nn", "torchvision", "timm", "transformers",
];

/// What the file's words allow.
struct Words<'a> {
    identifiers: FxHashSet<&'a str>,
    /// Identifiers in loop headers (`for` target and iterable, `while` condition): what
    /// the semantic model reads to tell a loop over batches from any other loop.
    loop_header: FxHashSet<&'a str>,
    /// Names of `def`s (what the semantic model calls a function's name).
    functions: FxHashSet<&'a str>,
    /// `train(False)` appears (with any whitespace): `.train(False)` switches to eval mode.
    train_false: bool,
    /// Identifiers that are called somewhere, or imported under another name.
    called: FxHashSet<&'a str>,
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

fn is_identifier_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
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

impl<'a> Words<'a> {
    fn scan(source: &'a str) -> Self {
        let bytes = source.as_bytes();
        let mut words = Words {
            identifiers: FxHashSet::default(),
            loop_header: FxHashSet::default(),
            functions: FxHashSet::default(),
            train_false: false,
            called: FxHashSet::default(),
        };
        // A header starts at `for`/`while` and ends at a `:` at depth 0 outside strings
        // (not `:=`), or when a bracket closes below its depth (a comprehension's `for`).
        // Every word is collected everywhere (strings included), so a mistaken start only
        // adds header words.
        let mut header: Option<Header> = None;
        let mut after_def = false;
        // Only whitespace (or `async`) so far on this line: a `for`/`while` statement
        // always starts its line, so the word in prose or a comprehension starts nothing.
        let mut at_line_start = true;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if is_identifier_byte(b) && !b.is_ascii_digit() {
                let start = i;
                while i < bytes.len() && is_identifier_byte(bytes[i]) {
                    i += 1;
                }
                // Identifiers are ASCII or whole UTF-8 characters: the slice is on char boundaries.
                let Some(word) = source.get(start..i) else { continue };
                words.identifiers.insert(word);
                if after_def {
                    words.functions.insert(word);
                }
                after_def = word == "def";
                if word == "train" && called_with_false(bytes, i) {
                    words.train_false = true;
                }
                if matches!(word, "load" | "backward" | "grad") && called_or_renamed(bytes, i) {
                    words.called.insert(word);
                }
                match header {
                    Some(_) => {
                        words.loop_header.insert(word);
                    }
                    None if at_line_start && (word == "for" || word == "while") => {
                        header = Some(Header { depth: 0, string: None, ended: false });
                    }
                    None => {}
                }
                at_line_start = at_line_start && word == "async";
                continue;
            }
            if b.is_ascii_digit() {
                while i < bytes.len() && is_identifier_byte(bytes[i]) {
                    i += 1;
                }
                at_line_start = false;
                continue;
            }
            if b == b'\n' {
                at_line_start = true;
            } else if !b.is_ascii_whitespace() {
                after_def = false;
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
                                    words.identifiers.insert(word);
                                    words.loop_header.insert(word);
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
        words
    }

    fn has(&self, word: &str) -> bool {
        self.identifiers.contains(word)
    }

    /// Could some name in the file hold a model, a loss, or a tensor with history?
    fn mentions_a_model(&self) -> bool {
        MODULE_TOKENS.iter().any(|t| self.has(t)) || self.identifiers.iter().any(|w| name_says_model(w) || name_says_loss(w))
    }

    /// Could some code be evaluation code: a function named for evaluation, a loop over
    /// validation or test data, `.eval()`, or `.train(False)`?
    fn mentions_evaluation(&self) -> bool {
        self.has("eval")
            || self.train_false
            || self.functions.iter().any(|f| function_name_says_eval(f))
            || (self.loop_header.iter().any(|w| name_says_data(w))
                && self.loop_header.iter().any(|w| name_says_eval(w) || w.contains("val") || w.contains("test")))
    }

    /// Could `backward()` or `torch.autograd.grad` be called?
    fn mentions_backward(&self) -> bool {
        self.called.contains("backward") || self.called.contains("grad")
    }

    /// Could an optimizer (or a `GradScaler`) be stepped: `.step()` on a name with `opt`
    /// or `scaler` in it?
    fn mentions_optimizer_step(&self) -> bool {
        self.has("step") && self.identifiers.iter().any(|w| name_says_optimizer(w))
    }

    /// Could a loop go over batches: data in a loop header, or a backward pass or an
    /// optimizer step somewhere?
    fn mentions_batches(&self) -> bool {
        self.loop_header.iter().any(|w| name_says_data(w)) || self.mentions_backward() || self.mentions_optimizer_step()
    }
}

fn contains(source: &str, word: &str) -> bool {
    memchr::memmem::find(source.as_bytes(), word.as_bytes()).is_some()
}

/// The enabled rules that could report something in `source`.
pub fn rules_that_could_fire(source: &str, enabled: &RuleSelection) -> RuleSelection {
    let words = Words::scan(source);
    let mut selection = RuleSelection::none();
    for rule in enabled.iter() {
        let possible = match rule {
            Rule::EvalWithoutNoGrad => contains(source, "volatile") || (words.mentions_evaluation() && words.mentions_a_model()),
            Rule::AccumulatedLossTensor => {
                (contains(source, "+") || words.has("append")) && words.mentions_batches() && words.mentions_a_model()
            }
            Rule::HalfWithoutGradScaler => {
                contains(source, "backward") && ["half", "float16", "autocast"].iter().any(|w| contains(source, w))
            }
            Rule::EmptyCacheInLoop => contains(source, "empty_cache"),
            Rule::RetainGraphInLoop => words.has("retain_graph"),
            Rule::GpuTensorsCollected => words.mentions_batches(),
            Rule::DataParallel => words.has("DataParallel") || words.has("data_parallel"),
            Rule::TorchLoadWithoutMapLocation => words.called.contains("load"),
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
    use super::Words;

    fn header(source: &str) -> Vec<&str> {
        let mut words: Vec<&str> = Words::scan(source).loop_header.into_iter().collect();
        words.sort();
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
        let words = Words::scan("x = torch.load (f)\ny = (loss.backward  # c\n  ())\ngrad = p.grad\n");
        assert!(words.called.contains("load") && words.called.contains("backward") && !words.called.contains("grad"));
        assert!(Words::scan("from torch.autograd import grad as g\n").called.contains("grad"));
    }

    #[test]
    fn train_false_with_any_spacing() {
        assert!(Words::scan("model.train( \n False)").train_false);
        assert!(!Words::scan("model.train(Falsehood)").train_false);
        assert!(!Words::scan("model.train()\nx = False").train_false);
    }

    #[test]
    fn a_comprehension_header_ends_with_its_bracket() {
        assert_eq!(header("ys = [f(x)\n      for x in xs]\nz = after\n"), ["in", "x", "xs"]);
    }
}
