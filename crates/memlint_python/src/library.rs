//! Library behaviour as data: what calls and methods of torch, torchvision, transformers,
//! timm, PEFT and Lightning do to the values they are given or return.



/// Methods only a `torch.nn.Module` has: a name they are called on holds a module.
pub(crate) const MODULE_ONLY_METHODS: &[&str] = &["eval", "parameters", "named_parameters", "load_state_dict", "requires_grad_", "modules", "named_modules"];

/// Library callables that build a network: `torch.nn` classes, torchvision / timm model
/// constructors, transformers' `from_pretrained`, `torch.hub.load`.
pub(crate) fn module_factory(qualified: &str) -> bool {
    let last = qualified.rsplit('.').next().unwrap_or("");
    let first_upper = last.chars().next().map(char::is_uppercase).unwrap_or(false);
    if qualified.starts_with("torch.nn.")
        && !qualified.starts_with("torch.nn.functional.")
        && !qualified.starts_with("torch.nn.utils")
        && !qualified.starts_with("torch.nn.init")
        && !qualified.starts_with("torch.nn.parallel.data_parallel")
        && first_upper
    {
        return !matches!(last, "Parameter" | "ParameterList" | "ParameterDict");
    }
    (qualified.starts_with("torchvision.models.") && !qualified.contains("Weights") && last.chars().next().map(char::is_lowercase).unwrap_or(false))
        || qualified == "timm.create_model"
        || qualified == "torch.hub.load"
        || (qualified.starts_with("transformers.") && last == "from_pretrained" && !pretrained_class_is_not_a_network(qualified))
}

/// `from_pretrained` of these loads something other than a network: a tokenizer, a
/// feature extractor or processor, a configuration, a noise scheduler, or a pipeline (which
/// holds networks but is not one, and runs them under `no_grad`). `class` is the callee
/// as spelled or qualified (`transformers.AutoTokenizer.from_pretrained`).
pub fn pretrained_class_is_not_a_network(class: &str) -> bool {
    ["Tokenizer", "Processor", "FeatureExtractor", "Config", "Scheduler", "Pipeline"].iter().any(|w| class.contains(w))
}

/// `from_pretrained` of these loads a network with every parameter frozen unless it is
/// given `is_trainable=True`: PEFT's `PeftModel`, `PeftModelFor*` and `AutoPeftModel*` load
/// for inference by default (not `PeftMixedModel`, which activates, and so unfreezes, the
/// adapter it loads). `class` as for [`pretrained_class_is_not_a_network`].
pub fn pretrained_class_loads_frozen(class: &str) -> bool {
    let last_class = class.trim_end_matches(".from_pretrained").rsplit('.').next().unwrap_or("");
    ["PeftModel", "AutoPeftModel"].iter().any(|p| last_class.starts_with(p)) && !last_class.starts_with("PeftMixedModel")
}

/// Does a call of `callee` (qualified through imports; a `from_pretrained` call also as
/// spelled) load a pretrained network that trains unless frozen? `keyword` gives a keyword
/// argument's text as written. `X.from_pretrained` of a network (not a tokenizer, and not
/// a PEFT model loaded frozen), `torchvision.models.<arch>(weights=...)` or
/// `(pretrained=True)`, `timm.create_model(..., pretrained=True)`, `torch.hub.load(...)`.
pub fn loads_pretrained_network(callee: &str, keyword: &dyn Fn(&str) -> Option<String>) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    if last == "from_pretrained" {
        let trainable = keyword("is_trainable").is_some_and(|v| v != "False");
        return !pretrained_class_is_not_a_network(callee) && !(pretrained_class_loads_frozen(callee) && !trainable);
    }
    if callee.starts_with("torchvision.models.") {
        return keyword("weights").is_some_and(|w| w != "None") || keyword("pretrained").as_deref() == Some("True");
    }
    if callee == "timm.create_model" {
        return keyword("pretrained").as_deref() == Some("True");
    }
    callee == "torch.hub.load"
}

/// May a class whose source is `text` freeze the pretrained network it loads, or run it
/// without autograd? It mentions `requires_grad` (`p.requires_grad = False`,
/// `requires_grad_(False)`), `no_grad` or `inference_mode`.
pub(crate) fn class_may_freeze(text: &str) -> bool {
    ["requires_grad", "no_grad", "inference_mode"].iter().any(|w| text.contains(w))
}

/// Methods after which a network PEFT loaded frozen may train again: asked for its
/// parameters (a loop may set `requires_grad`), `requires_grad_`, and PEFT's own
/// `set_adapter` / `set_requires_grad` / `add_adapter`, which make adapters trainable
/// (`load_adapter` does only with `is_trainable=True`).
pub(crate) const UNFREEZING_METHODS: &[&str] = &["requires_grad_", "parameters", "named_parameters", "set_adapter", "set_requires_grad", "add_adapter"];

/// Lightning hooks that run under `torch.no_grad()` already.
pub(crate) const NO_GRAD_HOOKS: &[&str] = &["validation_step", "test_step", "predict_step"];

/// Methods of an `nn.Module` that return the module itself (`Net().cuda().eval()` is the
/// network), as the model, the project summaries and the rules follow them.
pub const MODULE_METHODS_RETURNING_SELF: &[&str] =
    &["to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_", "type", "share_memory"];

