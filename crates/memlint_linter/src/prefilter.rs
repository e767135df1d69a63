//! The byte-level pre-filter: parsing is memlint's main cost, so a file is parsed only
//! when some enabled rule could fire in it. Each rule here has a *necessary* condition on
//! the file's words (a rule that cannot be summarised that way always runs); the test
//! `prefilter_is_sound` checks that filtering never changes what is reported.

use std::collections::HashSet;

use memlint_python::{name_says_eval, name_says_loss, name_says_model, name_words};

use crate::{Rule, RuleSelection};

/// Identifiers whose presence can make a value a model or a tensor with history without
/// the name saying so: module classes, `forward`, `torch.nn` constructors, model zoos.
const MODULE_TOKENS: &[&str] = &[
    "Module", "LightningModule", "forward", "requires_grad_", "nn", "torchvision", "timm", "transformers",
];

/// What the file's words allow.
struct Words<'a> {
    identifiers: HashSet<&'a str>,
}

impl<'a> Words<'a> {
    fn scan(source: &'a str) -> Self {
        let bytes = source.as_bytes();
        let mut identifiers = HashSet::new();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_alphabetic() || b == b'_' || b >= 0x80 {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80) {
                    i += 1;
                }
                // Identifiers are ASCII or whole UTF-8 characters: the slice is on char boundaries.
                if let Some(word) = source.get(start..i) {
                    identifiers.insert(word);
                }
            } else {
                i += 1;
            }
        }
        Words { identifiers }
    }

    fn has(&self, word: &str) -> bool {
        self.identifiers.contains(word)
    }

    /// Could some name in the file hold a model, a loss, or a tensor with history?
    fn mentions_a_model(&self) -> bool {
        MODULE_TOKENS.iter().any(|t| self.has(t)) || self.identifiers.iter().any(|w| name_says_model(w) || name_says_loss(w))
    }

    /// Could some code be evaluation code (a name saying so, `.eval()`, `.train(False)`)?
    fn mentions_evaluation(&self) -> bool {
        self.has("train")
            || self.identifiers.iter().any(|w| {
                name_says_eval(w)
                    // `valloader`, `testset`: an evaluation word glued to a data word.
                    || name_words(w).iter().any(|part| {
                        ["loader", "dataset", "data", "set", "dl", "ds", "batches"]
                            .iter()
                            .any(|suffix| part.len() > suffix.len() && part.ends_with(suffix) && name_says_eval(&part[..part.len() - suffix.len()]))
                    })
            })
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
            Rule::AccumulatedLossTensor => (contains(source, "+") || contains(source, "append")) && words.mentions_a_model(),
            Rule::HalfWithoutGradScaler => {
                contains(source, "backward") && ["half", "float16", "autocast"].iter().any(|w| contains(source, w))
            }
            Rule::EmptyCacheInLoop => contains(source, "empty_cache"),
            #[allow(unreachable_patterns)]
            _ => true,
        };
        if possible {
            selection.enable(rule);
        }
    }
    selection
}
