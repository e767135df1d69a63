//! What names say: word lists and the `name_says_*` predicates.
//!
//! A name is never evidence of what a value is (issue 32): these predicates serve the
//! pre-filter's triggers (necessary conditions over a file's words), messages, and the
//! ranking of findings whose values are already known by their facts.

use rustc_hash::FxHashSet as HashSet;


/// Words in a name that say "this is a model".
pub(crate) const MODEL_WORDS: &[&str] = &[
    "model", "models", "net", "network", "encoder", "decoder", "backbone", "classifier",
    "generator", "discriminator", "teacher", "student", "unet", "vae", "transformer", "critic",
    "actor", "policy", "resnet", "vgg", "bert", "gpt", "llm", "extractor", "autoencoder",
    "detector", "segmenter", "lm", "vit", "clip", "gan",
];

/// First words of a function name that does something to a model rather than being one.
pub(crate) const NOT_MODEL_VERBS: &[&str] = &[
    "get", "create", "build", "make", "load", "download", "update", "step", "swap", "prepare",
    "init", "initialize", "gen", "compute", "apply", "setup", "set", "convert", "wrap", "unwrap",
    "check", "is", "has", "save", "freeze", "unfreeze", "register", "resolve", "validate",
    "maybe", "patch", "replace", "copy", "print", "log", "export", "find", "fetch", "parse",
    "optimize", "extract", "enable", "disable", "reset", "count", "infer", "cast", "move",
    "configure",
];

/// Last words of a name for something a model has or needs, not the model itself.
pub(crate) const NOT_MODEL_NOUNS: &[&str] = &[
    "kwargs", "args", "cache", "config", "cfg", "path", "paths", "name", "names", "dir", "file",
    "type", "types", "cls", "class", "id", "ids", "state", "dict", "registry", "mask", "masks",
    "size", "dim", "params", "parameters", "keys", "list", "info", "card", "url", "version",
    "mixin", "output", "outputs", "tokens", "kwarg", "inputs", "generation", "index",
    // What is done to a model or kept beside it: `clip_gradients`, `clip_grad_norm_`,
    // `model_sharded_context`, `attach_model_callbacks`, `device_map`, `run_gpt2_test`,
    // `model_to_device`, `set_model_graph`, `attach_model_logging_functions`.
    "gradients", "gradient", "grads", "grad", "norm", "context", "callbacks", "callback",
    "hooks", "hook", "attr", "attrs", "map", "usage", "test", "tests", "device", "graph",
    "function", "functions", "value", "values",
    // A tensor of a model: `saved_model_param`, `model_weights`, `model_buffer`.
    "param", "parameter", "weight", "weights", "tensor", "tensors", "buffer", "buffers",
];

/// Words in a name that say "this is a loss function object".
pub(crate) const LOSS_WORDS: &[&str] = &["criterion", "criteria", "loss_fn", "lossfn", "loss_func", "loss_function", "loss_module"];

/// Words in a name that say evaluation or inference.
pub(crate) const EVAL_WORDS: &[&str] = &[
    "eval", "evaluate", "evaluation", "evaluating", "validate", "validation", "validating", "val",
    "valid", "test", "testing", "predict", "prediction", "predictions", "infer", "inference",
    "generate", "generation", "sample", "sampling", "dev", "holdout",
];

/// First words of functions that check, get or prepare something, even when an
/// evaluation word follows (`is_valid`, `get_test_split`).
pub(crate) const NOT_EVAL_FUNCTION_VERBS: &[&str] = &[
    "is", "has", "get", "set", "check", "create", "prepare", "update", "build", "make", "init",
    "setup", "load", "save", "register", "maybe", "convert", "parse", "to", "from", "should",
    "can", "add", "remove", "on",
];

/// Last words of functions that validate or generate something other than a model's output.
pub(crate) const NOT_EVAL_FUNCTION_OBJECTS: &[&str] = &[
    "inputs", "input", "environment", "architecture", "kwargs", "args", "arguments", "config",
    "cfg", "params", "parameters", "shape", "shapes", "dtype", "type", "types", "anchors",
    "ratio", "value", "values", "path", "format", "mask", "masks", "name", "names", "keys",
    "frames", "indices", "ids", "length", "size", "options", "dataloader", "loader",
    "dataset", "file", "files", "signature", "spec", "schema", "settings", "start", "end",
];


/// Splits an identifier into lower-case words: `valLoader2` -> [val, loader2], `train_dl` -> [train, dl].
pub fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '.' || !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// A quick necessary condition for the `name_says_*` predicates: does an ASCII name
/// contain one of the words (ASCII case-insensitively)? Every word those predicates
/// accept is a piece of the name, so `false` here means they answer `false`, without
/// splitting the name. Non-ASCII names (whose lower case can be ASCII) always pass.
pub(crate) struct WordFilter {
    words: &'static [&'static str],
    automaton: std::sync::OnceLock<aho_corasick::AhoCorasick>,
    /// For whole texts: the words in lower case, leftmost-first (any occurrence will
    /// do), searched in a lower-case copy, so the SIMD prefilter can be used.
    text_automaton: std::sync::OnceLock<aho_corasick::AhoCorasick>,
}

impl WordFilter {
    const fn new(words: &'static [&'static str]) -> Self {
        WordFilter { words, automaton: std::sync::OnceLock::new(), text_automaton: std::sync::OnceLock::new() }
    }

    pub(crate) fn may_match(&self, name: &str) -> bool {
        if !name.is_ascii() {
            return true;
        }
        self.automaton().is_match(name)
    }
}

impl WordFilter {
    pub(crate) fn automaton(&self) -> &aho_corasick::AhoCorasick {
        self.automaton.get_or_init(|| {
            aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(self.words)
                .expect("a few plain words build an automaton")
        })
    }

    /// Does some word of `text` (a maximal run of identifier characters: ASCII letters,
    /// digits, `_` and any non-ASCII character; in code, strings or comments) satisfy
    /// `says`, a predicate this filter is a necessary condition of? Searches the text for
    /// the filter's words instead of testing every word; a non-ASCII word is also tested
    /// piece by piece (split at what is not alphanumeric), as a comment splits.
    /// `lower` is `text` in ASCII lower case (the same length).
    pub(crate) fn any_word_of(&self, text: &str, lower: &str, says: impl Fn(&str) -> bool) -> bool {
        let bytes = text.as_bytes();
        let is_word_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
        let word_around = |at: usize| {
            let start = bytes[..at].iter().rposition(|b| !is_word_byte(*b)).map(|p| p + 1).unwrap_or(0);
            let end = bytes[at..].iter().position(|b| !is_word_byte(*b)).map(|p| at + p).unwrap_or(bytes.len());
            // Runs end at ASCII bytes (or the ends of the text): whole characters.
            &text[start..end]
        };
        let test = |word: &str| {
            says(word) || (!word.is_ascii() && word.split(|c: char| !c.is_alphanumeric() && c != '_').any(|p| !p.is_empty() && says(p)))
        };
        let mut tested: HashSet<&str> = HashSet::default();
        let automaton = self.text_automaton.get_or_init(|| {
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(self.words.iter().map(|w| w.to_ascii_lowercase()))
                .expect("a few plain words build an automaton")
        });
        let mut from = 0;
        while let Some(m) = automaton.find(aho_corasick::Input::new(lower.as_bytes()).range(from..)) {
            let word = word_around(m.start());
            if tested.insert(word) && test(word) {
                return true;
            }
            from = word.as_ptr() as usize - text.as_ptr() as usize + word.len();
        }
        // The lower case of a non-ASCII word can hold a filter word (the Kelvin sign is `k`).
        let mut from = 0;
        while let Some(n) = bytes[from..].iter().position(|b| *b >= 0x80) {
            let word = word_around(from + n);
            if tested.insert(word) && test(word) {
                return true;
            }
            from = word.as_ptr() as usize - text.as_ptr() as usize + word.len();
        }
        false
    }
}

/// Does some word of `text` (code, strings and comments alike) say it holds a model or
/// a loss function ([`name_says_model`], [`name_says_loss`])?
pub fn text_names_a_model_or_loss(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    MODEL_FILTER.any_word_of(text, &lower, name_says_model) || LOSS_FILTER.any_word_of(text, &lower, name_says_loss)
}

/// Does some word of `text` say it holds an optimizer ([`name_says_optimizer`])?
pub fn text_names_an_optimizer(text: &str) -> bool {
    OPTIMIZER_FILTER.any_word_of(text, &text.to_ascii_lowercase(), name_says_optimizer)
}

pub(crate) static MODEL_FILTER: WordFilter = WordFilter::new(MODEL_WORDS);

pub(crate) static LOSS_FILTER: WordFilter = WordFilter::new(LOSS_WORDS);

pub(crate) static OPTIMIZER_FILTER: WordFilter = WordFilter::new(&["opt", "scaler"]);

pub(crate) static EVAL_FILTER: WordFilter = WordFilter::new(EVAL_WORDS);

pub(crate) static DATA_FILTER: WordFilter = WordFilter::new(&["loader", "dataset", "ds", "dl", "batches", "data", "iterator", "samples"]);

pub(crate) fn strip_digits(word: &str) -> &str {
    word.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Does a name say it holds a model (`model`, `self.encoder`, `resnet50`, `G_net`)?
/// A verb phrase (`get_model`, `step_model`, `_update_model_kwargs`) or a name for
/// something a model has (`model_config`, `model_path`, `encoder_cache`) does not.
pub fn name_says_model(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    if !MODEL_FILTER.may_match(last) {
        return false;
    }
    let words = name_words(last);
    let (Some(first), Some(final_word)) = (words.first(), words.last()) else { return false };
    if words.len() > 1 && (NOT_MODEL_VERBS.contains(&first.as_str()) || NOT_MODEL_NOUNS.contains(&strip_digits(final_word))) {
        return false;
    }
    if words.iter().any(|w| MODEL_WORDS.contains(&strip_digits(w))) {
        return true;
    }
    let lower = last.to_lowercase();
    let lower = strip_digits(&lower);
    lower.ends_with("model") || lower.ends_with("net")
}

/// Does the name of a module class say it computes a loss (`FocalLoss`, `CrossEntropyLoss2d`,
/// `DiceLoss3D`, `perceptual_loss`)? Asked only of a class known to build a module, to tell
/// a loss from a network.
pub fn class_name_says_loss(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let stem = last.trim_end_matches(['d', 'D']).trim_end_matches(|c: char| c.is_ascii_digit());
    name_says_loss(last) || last.ends_with("Loss") || (stem.len() < last.len() && stem.ends_with("Loss"))
}

/// Does a name say it holds a loss function object (`criterion`, `loss_fn`)?
pub fn name_says_loss(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    if !LOSS_FILTER.may_match(last) {
        return false;
    }
    let last = last.to_lowercase();
    LOSS_WORDS.iter().any(|w| {
        last == *w
            || last.strip_suffix(w).map(|rest| rest.ends_with('_')).unwrap_or(false)
            || last.strip_prefix(w).map(|rest| rest.starts_with('_')).unwrap_or(false)
    })
}

/// Does a name (or an expression's text) say it holds an optimizer or a `GradScaler`
/// (`optimizer`, `opt_g`, `optimD`, `self.optimizers()[0]`, `scaler`)? `Optional` and
/// `options` do not.
pub fn name_says_optimizer(name: &str) -> bool {
    if !OPTIMIZER_FILTER.may_match(name) {
        return false;
    }
    name_words(name).iter().any(|w| {
        let w = strip_digits(w);
        w == "opt" || w.starts_with("optim") || w.ends_with("scaler")
    })
}

/// Does a name say evaluation/inference (`evaluate`, `val_loader`, `test_step`, `run_inference`)?
pub fn name_says_eval(name: &str) -> bool {
    if !EVAL_FILTER.may_match(name) {
        return false;
    }
    name_words(name).iter().any(|w| EVAL_WORDS.contains(&strip_digits(w)))
}

/// Does a function's name say it evaluates or runs inference (`evaluate`,
/// `validate_one_epoch`, `run_test`, `predict`, `generate`, `sample`)? Not a check, getter
/// or preparation step (`validate_inputs`, `is_valid_image`, `get_valid_ratio`,
/// `prepare_inputs_for_generation`): only the words before a `for` count, and a name that
/// starts with such a verb or ends with what it checks or makes is not evaluation.
pub fn function_name_says_eval(name: &str) -> bool {
    if !EVAL_FILTER.may_match(name) {
        return false;
    }
    let words = name_words(name);
    let words: Vec<&str> = words.iter().map(|w| strip_digits(w)).take_while(|w| *w != "for").collect();
    let (Some(first), Some(last)) = (words.first(), words.last()) else { return false };
    if words.len() > 1 && (NOT_EVAL_FUNCTION_VERBS.contains(first) || NOT_EVAL_FUNCTION_OBJECTS.contains(last)) {
        return false;
    }
    words.iter().any(|w| EVAL_WORDS.contains(w))
}

/// Does a name say it holds batches of data (`train_loader`, `dataset`, `dl`)?
pub fn name_says_data(name: &str) -> bool {
    if !DATA_FILTER.may_match(name) {
        return false;
    }
    let words = name_words(name);
    words.iter().any(|w| {
        let w = strip_digits(w);
        matches!(w, "loader" | "dataloader" | "dataset" | "ds" | "dl" | "batches" | "data" | "iterator" | "datapipe" | "minibatches" | "samples")
            || w.ends_with("loader")
    })
}

