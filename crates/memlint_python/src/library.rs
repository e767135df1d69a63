//! Library behaviour as data (issue 32): what the calls and methods of torch, torchvision,
//! transformers, timm, PEFT, Lightning, accelerate, numpy, JAX and TensorFlow do to the
//! values they are given or return. No library name appears anywhere else in the semantic
//! model or the rules; they ask [`call_model`], [`method_model`] and the predicates here.
//!
//! A library call memlint has no model of returns an unknown value: it is never guessed
//! from the callee's name.

/// What calling a library function (or class) does, as far as GPU memory is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Builds a network (a module instance): `torch.nn.Linear(...)`, `resnet50()`.
    BuildsNetwork,
    /// Builds a loss module: `torch.nn.CrossEntropyLoss()`.
    BuildsLoss,
    /// Returns the network it is given, wrapped or compiled: `torch.compile(m)`,
    /// `copy.deepcopy(m)`, `torch.jit.script(m)`; the value of its first argument.
    ReturnsFirstArgument,
    /// Returns its arguments in order (`accelerator.prepare(model, opt, loader)`).
    ReturnsArguments,
    BuildsOptimizer,
    BuildsScaler,
    BuildsLoader,
    /// A tensor made from data or a shape: it has no autograd history.
    NewTensor,
    /// A tensor operation: its result carries history when an argument does.
    TensorOp,
    /// A tensor operation whose result never carries history (`argmax`, comparisons).
    TensorNoHistory,
    /// A Python number.
    Number,
    /// A value of another framework (a numpy array, a JAX or TensorFlow array).
    Foreign,
    /// Runs `backward()` on its argument (`torch.autograd.backward`, `autograd.grad`).
    Backward,
    /// A context manager or decorator that disables gradients (`torch.no_grad`).
    DisablesGrad,
    /// `torch.enable_grad`.
    EnablesGrad,
    /// `torch.set_grad_enabled(flag)`.
    SetsGrad,
    /// Reads its arguments and keeps nothing of them (saving, printing, plotting).
    ReadsOnly,
    /// Returns something that is none of the above (a device, a generator, `None`).
    Other,
}

/// Library functions and classes by qualified name: an exact name, or a prefix ending in
/// `.` (every name under it), or `*` standing for "a name starting with an upper-case
/// letter" after the prefix (a class). The first entry that matches decides.
const CALLS: &[(&str, Call)] = &[
    // ----- torch: gradient modes
    ("torch.no_grad", Call::DisablesGrad),
    ("torch.inference_mode", Call::DisablesGrad),
    ("torch.autograd.no_grad", Call::DisablesGrad),
    ("torch.autograd.grad_mode.no_grad", Call::DisablesGrad),
    ("torch.enable_grad", Call::EnablesGrad),
    ("torch.set_grad_enabled", Call::SetsGrad),
    ("torch.autograd.set_grad_enabled", Call::SetsGrad),
    ("torch.autograd.backward", Call::Backward),
    ("torch.autograd.grad", Call::Backward),
    // ----- torch: optimizers, scalers, loaders
    ("torch.optim.lr_scheduler.", Call::Other),
    ("torch.optim.*", Call::BuildsOptimizer),
    ("torch.cuda.amp.GradScaler", Call::BuildsScaler),
    ("torch.amp.GradScaler", Call::BuildsScaler),
    ("torch.cpu.amp.GradScaler", Call::BuildsScaler),
    ("torch.utils.data.DataLoader", Call::BuildsLoader),
    ("torch.utils.data.dataloader.DataLoader", Call::BuildsLoader),
    ("torch.utils.data.", Call::Other),
    // ----- torch: networks
    ("torch.nn.functional.", Call::TensorOp),
    ("torch.nn.init.", Call::Other),
    ("torch.nn.utils.clip_grad_norm_", Call::Number),
    ("torch.nn.utils.clip_grad_value_", Call::Other),
    ("torch.nn.utils.", Call::Other),
    ("torch.nn.parallel.data_parallel", Call::TensorOp),
    ("torch.nn.Parameter", Call::NewTensor),
    ("torch.nn.ParameterList", Call::Other),
    ("torch.nn.ParameterDict", Call::Other),
    ("torch.nn.*", Call::BuildsNetwork),
    ("torch.compile", Call::ReturnsFirstArgument),
    ("torch.jit.script", Call::ReturnsFirstArgument),
    ("torch.jit.trace", Call::ReturnsFirstArgument),
    ("torch.hub.load", Call::BuildsNetwork),
    ("copy.deepcopy", Call::ReturnsFirstArgument),
    // ----- torch: tensors
    ("torch.load", Call::Other),
    ("torch.save", Call::ReadsOnly),
    ("torch.device", Call::Other),
    ("torch.manual_seed", Call::Other),
    ("torch.cuda.", Call::Other),
    ("torch.backends.", Call::Other),
    ("torch.distributed.", Call::Other),
    ("torch.multiprocessing.", Call::Other),
    ("torch.amp.", Call::Other),
    ("torch.is_tensor", Call::Other),
    ("torch.numel", Call::Number),
    ("torch.argmax", Call::TensorNoHistory),
    ("torch.argmin", Call::TensorNoHistory),
    ("torch.argsort", Call::TensorNoHistory),
    ("torch.eq", Call::TensorNoHistory),
    ("torch.ne", Call::TensorNoHistory),
    ("torch.randint", Call::NewTensor),
    ("torch.randperm", Call::NewTensor),
    ("torch.zeros", Call::NewTensor),
    ("torch.ones", Call::NewTensor),
    ("torch.empty", Call::NewTensor),
    ("torch.full", Call::NewTensor),
    ("torch.tensor", Call::NewTensor),
    ("torch.Tensor", Call::NewTensor),
    ("torch.FloatTensor", Call::NewTensor),
    ("torch.LongTensor", Call::NewTensor),
    ("torch.as_tensor", Call::NewTensor),
    ("torch.from_numpy", Call::NewTensor),
    ("torch.arange", Call::NewTensor),
    ("torch.linspace", Call::NewTensor),
    ("torch.randn", Call::NewTensor),
    ("torch.rand", Call::NewTensor),
    ("torch.eye", Call::NewTensor),
    ("torch.zeros_like", Call::NewTensor),
    ("torch.ones_like", Call::NewTensor),
    ("torch.empty_like", Call::NewTensor),
    ("torch.full_like", Call::NewTensor),
    ("torch.randn_like", Call::NewTensor),
    ("torch.rand_like", Call::NewTensor),
    ("torch.", Call::TensorOp),
    // ----- torchvision, timm, transformers, diffusers, PEFT, Lightning, accelerate
    ("torchvision.models.get_model_weights", Call::Other),
    ("torchvision.models.get_weight", Call::Other),
    ("torchvision.models.list_models", Call::Other),
    ("torchvision.models.", Call::BuildsNetwork),
    ("torchvision.utils.save_image", Call::ReadsOnly),
    ("torchvision.utils.make_grid", Call::TensorNoHistory),
    ("torchvision.", Call::Other),
    ("timm.create_model", Call::BuildsNetwork),
    ("peft.get_peft_model", Call::ReturnsFirstArgument),
    ("peft.prepare_model_for_kbit_training", Call::ReturnsFirstArgument),
    ("deepspeed.initialize", Call::ReturnsArguments),
    ("apex.fp16_utils.FP16_Optimizer", Call::BuildsOptimizer),
    ("apex.fp16_utils.fp16_optimizer.FP16_Optimizer", Call::BuildsOptimizer),
    ("apex.optimizers.*", Call::BuildsOptimizer),
    // ----- other frameworks' values
    ("numpy.", Call::Foreign),
    ("jax.", Call::Foreign),
    ("flax.", Call::Foreign),
    ("optax.", Call::Foreign),
    ("tensorflow.", Call::Foreign),
    ("cv2.", Call::Foreign),
    ("PIL.", Call::Foreign),
    ("pandas.", Call::Foreign),
    ("scipy.", Call::Foreign),
    ("sklearn.", Call::Foreign),
    ("math.", Call::Number),
    ("random.random", Call::Number),
    ("random.uniform", Call::Number),
    ("random.randint", Call::Number),
    ("time.time", Call::Number),
    ("time.perf_counter", Call::Number),
    // ----- reading: logging, plotting, saving
    ("matplotlib.", Call::ReadsOnly),
    ("imageio.", Call::ReadsOnly),
    ("skimage.io.", Call::ReadsOnly),
    ("wandb.", Call::ReadsOnly),
    ("tensorboardX.", Call::ReadsOnly),
    ("logging.", Call::ReadsOnly),
    ("json.", Call::ReadsOnly),
    ("pickle.", Call::ReadsOnly),
    ("os.", Call::ReadsOnly),
    ("sys.", Call::ReadsOnly),
];

/// Classes of transformers and diffusers whose constructor builds a network from a
/// configuration (`GPT2LMHeadModel(config)`, `BertForSequenceClassification(cfg)`,
/// `UNet2DModel(...)`): a class whose last name part ends in `Model`, holds `For` between
/// two capitalized words, or is one of the `Auto*` model classes' `from_config`.
fn hub_network_class(last: &str) -> bool {
    last.ends_with("Model") && !last.ends_with("TokenizerModel") || (last.contains("For") && last.starts_with(char::is_uppercase))
}

/// What calling the library callable `qualified` (fully qualified through the imports)
/// does, or `None` when memlint has no model of it.
pub fn call_model(qualified: &str) -> Option<Call> {
    let last = qualified.rsplit('.').next().unwrap_or(qualified);
    // transformers / diffusers: `from_pretrained` of a network, a network class, a config.
    for hub in ["transformers.", "diffusers.", "peft."] {
        if let Some(rest) = qualified.strip_prefix(hub) {
            if last == "from_pretrained" || last == "from_config" {
                return Some(if pretrained_class_is_not_a_network(qualified) { Call::Other } else { Call::BuildsNetwork });
            }
            let class = rest.rsplit('.').next().unwrap_or(rest);
            if hub_network_class(class) && !pretrained_class_is_not_a_network(class) {
                return Some(Call::BuildsNetwork);
            }
            return Some(Call::Other);
        }
    }
    // torchvision's weight enums (`ResNet50_Weights.DEFAULT`) are not networks.
    if qualified.starts_with("torchvision.models.") && qualified.contains("Weights") {
        return Some(Call::Other);
    }
    for (pattern, call) in CALLS {
        let matches = if let Some(prefix) = pattern.strip_suffix('*') {
            qualified.strip_prefix(prefix).is_some_and(|rest| rest.starts_with(char::is_uppercase) && !rest.contains('.'))
        } else if pattern.ends_with('.') {
            qualified.starts_with(pattern)
        } else {
            qualified == *pattern
        };
        if matches {
            if *call == Call::BuildsNetwork && class_name_says_loss_class(last) {
                return Some(Call::BuildsLoss);
            }
            return Some(*call);
        }
    }
    None
}

/// `CrossEntropyLoss`, `NLLLoss2d`, `BCEWithLogitsLoss`: a `torch.nn` class that computes a
/// loss (its class name says so: library classes are named by their maintainers).
fn class_name_says_loss_class(last: &str) -> bool {
    let stem = last.trim_end_matches(['d', 'D']).trim_end_matches(|c: char| c.is_ascii_digit());
    last.ends_with("Loss") || stem.ends_with("Loss")
}

/// Tensor factories that build on the CPU unless given a `device` (`torch.zeros(3)`,
/// `torch.tensor(xs)` of Python data), and `torch.from_numpy`, which always does: where a
/// value built by one of them lives, for MEM008's files saved from CPU values.
pub fn builds_on_the_cpu_without_device(qualified: &str) -> bool {
    const FACTORIES: &[&str] = &[
        "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand", "torch.randn", "torch.randint", "torch.arange",
        "torch.linspace", "torch.eye", "torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.from_numpy",
    ];
    FACTORIES.contains(&qualified)
}

/// `torch.nn` layers that hold no parameters (activations, pooling, padding, resampling,
/// dropout, reshaping): their forward records a graph only when its input carries one.
/// Normalization layers are not here (`affine` gives them weights).
pub fn layer_holds_no_parameters(qualified: &str) -> bool {
    const LAYERS: &[&str] = &[
        "ReLU", "ReLU6", "LeakyReLU", "RReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh", "Hardtanh",
        "Hardsigmoid", "Hardswish", "Softplus", "Softsign", "Softmax", "Softmax2d", "LogSoftmax", "Softmin", "Threshold",
        "Tanhshrink", "Softshrink", "Hardshrink", "LogSigmoid", "GLU", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
        "AlphaDropout", "FeatureAlphaDropout", "Identity", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d",
        "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
        "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "FractionalMaxPool2d",
        "FractionalMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "ReflectionPad1d", "ReflectionPad2d",
        "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
        "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d", "Upsample",
        "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Fold", "Unfold",
        "CosineSimilarity", "PairwiseDistance",
    ];
    let last = qualified.rsplit('.').next().unwrap_or(qualified);
    qualified.starts_with("torch.nn.") && !qualified.starts_with("torch.nn.functional.") && LAYERS.contains(&last)
}

/// Does this library call return a module that runs the module it is given (its first
/// argument) as its forward: the data-parallel wrappers, and the calls that return the
/// network they are given ([`Call::ReturnsFirstArgument`])?
pub fn wraps_its_first_argument(qualified: &str) -> bool {
    let last = qualified.rsplit('.').next().unwrap_or(qualified);
    (qualified.starts_with("torch.nn.") && matches!(last, "DataParallel" | "DistributedDataParallel"))
        || call_model(qualified) == Some(Call::ReturnsFirstArgument)
}

/// Is `qualified` `torch.nn.Module` itself (as its package exports it)?
pub fn is_the_module_base(qualified: &str) -> bool {
    matches!(qualified, "torch.nn.Module" | "torch.nn.modules.Module" | "torch.nn.modules.module.Module")
}

/// Can a module keep what this library call returns as an attribute without holding a
/// parameter: a layer without parameters, or a tensor, a number or another framework's
/// value (a buffer, a constant)?
pub fn stored_value_holds_no_parameters(qualified: &str) -> bool {
    layer_holds_no_parameters(qualified)
        || matches!(call_model(qualified), Some(Call::NewTensor | Call::TensorOp | Call::TensorNoHistory | Call::Number | Call::Foreign))
}

/// Is a library class (fully qualified) a `torch.nn.Module` subclass? `torch.nn.*` classes
/// (not `Parameter`), Lightning's `LightningModule`, and the model bases of transformers,
/// diffusers and timm.
pub fn library_module_class(qualified: &str) -> bool {
    let last = qualified.rsplit('.').next().unwrap_or(qualified);
    if !last.starts_with(char::is_uppercase) {
        return false;
    }
    if let Some(rest) = qualified.strip_prefix("torch.nn.") {
        return !rest.starts_with("functional.") && !rest.starts_with("init.") && !rest.starts_with("utils.") && !matches!(last, "Parameter" | "ParameterList" | "ParameterDict");
    }
    last == "Module" || last.ends_with("LightningModule") || last == "PreTrainedModel" || last == "ModelMixin"
}

/// Does a library function (fully qualified) return a module instance, or is it a module
/// class (calling it builds one)?
pub fn library_module_factory(qualified: &str) -> bool {
    library_module_class(qualified) || matches!(call_model(qualified), Some(Call::BuildsNetwork | Call::BuildsLoss))
}

/// Library callables that build a network (a class or a factory), for the model's
/// `ModuleClass` values.
pub(crate) fn module_factory(qualified: &str) -> bool {
    matches!(call_model(qualified), Some(Call::BuildsNetwork | Call::BuildsLoss))
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
/// Does a constructor's body (its text) freeze parameters: `requires_grad = False` or
/// `requires_grad_(False)` (perhaps under a condition on an argument)?
pub fn body_may_freeze_parameters(text: &str) -> bool {
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed.contains("requires_grad=False") || squeezed.contains("requires_grad_(False)")
}

pub(crate) fn class_may_freeze(text: &str) -> bool {
    ["requires_grad", "no_grad", "inference_mode"].iter().any(|w| text.contains(w))
}

/// Methods after which a network PEFT loaded frozen may train again: asked for its
/// parameters (a loop may set `requires_grad`), `requires_grad_`, and PEFT's own
/// `set_adapter` / `set_requires_grad` / `add_adapter`, which make adapters trainable
/// (`load_adapter` does only with `is_trainable=True`).
pub(crate) const UNFREEZING_METHODS: &[&str] = &["requires_grad_", "parameters", "named_parameters", "set_adapter", "set_requires_grad", "add_adapter"];

/// Hooks of a `LightningModule` that Lightning runs with gradients disabled: the steps and
/// the epoch and loop hooks of validation, test and prediction (the evaluation loop runs
/// under `torch.no_grad()` / `inference_mode()`).
pub(crate) const NO_GRAD_HOOKS: &[&str] = &[
    "validation_step", "test_step", "predict_step",
    "validation_step_end", "test_step_end", "validation_epoch_end", "test_epoch_end",
    "on_validation_epoch_end", "on_test_epoch_end", "on_predict_epoch_end",
    "on_validation_end", "on_test_end", "on_predict_end",
    "on_validation_batch_end", "on_test_batch_end", "on_predict_batch_end",
];

/// Methods of an `nn.Module` that return the module itself (`Net().cuda().eval()` is the
/// network), as the model, the project summaries and the rules follow them.
pub const MODULE_METHODS_RETURNING_SELF: &[&str] =
    &["to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_", "type", "share_memory", "to_empty", "xpu"];

/// Methods only a `torch.nn.Module` has: a value they are called on is a module (evidence
/// by use). `state_dict`, `zero_grad` and `train` are not among them: optimizers and
/// schedulers have them too.
pub const MODULE_ONLY_METHODS: &[&str] = &[
    "eval", "parameters", "named_parameters", "load_state_dict", "requires_grad_", "modules", "named_modules", "children",
    "named_children", "buffers", "named_buffers", "register_buffer", "register_forward_hook", "register_forward_pre_hook",
];

/// Methods of a network that are not a forward pass: the `nn.Module` API, and the
/// bookkeeping methods of transformers' and PEFT's models. `generate` runs under
/// `torch.no_grad()` inside transformers.
pub(crate) const MODULE_API_METHODS: &[&str] = &[
    "to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_", "type", "share_memory",
    "parameters", "named_parameters", "state_dict", "load_state_dict", "modules", "named_modules", "children", "named_children",
    "buffers", "named_buffers", "register_buffer", "register_parameter", "register_module", "add_module", "apply", "zero_grad",
    "register_forward_hook", "register_forward_pre_hook", "register_backward_hook", "register_full_backward_hook",
    "get_submodule", "get_parameter", "extra_repr", "save_pretrained", "push_to_hub", "resize_token_embeddings",
    "get_input_embeddings", "get_output_embeddings", "gradient_checkpointing_enable", "gradient_checkpointing_disable",
    "print_trainable_parameters", "num_parameters", "tie_weights", "generate", "merge_and_unload", "unload", "set_adapter",
    "add_adapter", "load_adapter", "enable_input_require_grads", "fuse_qkv_projections", "enable_xformers_memory_efficient_attention",
];

/// Methods of a tensor, by what they return: a number, a value without history, a value of
/// numpy, a tensor that keeps the object's history. Anything else on a tensor is a tensor
/// operation (history when the tensor has it).
pub(crate) fn tensor_method(method: &str) -> Call {
    match method {
        "item" | "tolist" | "__float__" | "numel" | "dim" | "size" | "nelement" | "element_size" | "ndimension" | "stride" | "get_device" => {
            Call::Number
        }
        "numpy" => Call::Foreign,
        "detach" | "detach_" | "argmax" | "argmin" | "argsort" | "long" | "int" | "bool" | "eq" | "ne" | "lt" | "gt" | "le" | "ge"
        | "sign" | "round" | "nonzero" | "isnan" | "isinf" | "data_ptr" => Call::TensorNoHistory,
        "backward" => Call::Backward,
        _ => Call::TensorOp,
    }
}

/// Does a call of `callee` (as spelled: `np.mean`, `float`) give no tensor: a number, a
/// string, a value of numpy or math?
pub(crate) fn call_gives_no_tensor(callee: &str) -> bool {
    let first = callee.split('.').next().unwrap_or(callee);
    matches!(first, "np" | "numpy" | "math" | "statistics") || matches!(callee, "float" | "int" | "len" | "round" | "str" | "bool" | "repr" | "format")
}

/// Methods of a value of another framework keep it one (`x.reshape`, `arr.clip`).
pub(crate) fn foreign_method(method: &str) -> Call {
    match method {
        "item" | "tolist" => Call::Number,
        _ => Call::Foreign,
    }
}


/// Builtins and methods that only read their arguments (print, log, save, convert).
pub(crate) const READING_CALLS: &[&str] = &[
    "print", "len", "float", "int", "str", "repr", "format", "isinstance", "round", "bool", "type", "range",
    "enumerate", "zip", "min", "max", "sum", "abs", "sorted", "list", "tuple", "dict", "set", "getattr",
    "add_image", "add_images", "add_scalar", "add_scalars", "add_histogram", "add_figure", "add_video",
    "add_audio", "add_text", "log", "info", "debug", "warning", "imsave", "imwrite", "imshow", "show",
    "save_image", "make_grid", "write", "display", "plot", "savefig", "format_map", "join",
];

/// Library prefixes whose functions only read a tensor (show, save, convert it): passing a
/// tensor with history to them keeps nothing.
pub(crate) const READING_LIBRARIES: &[&str] = &[
    "torch.", "torchvision.", "numpy.", "np.", "cv2.", "PIL.", "matplotlib.", "scipy.", "imageio.", "skimage.",
    "math.", "os.", "json.", "logging.", "pickle.", "wandb.", "tensorboardX.", "time.", "random.", "sys.",
];

/// Calls that build a Python container (builtins by name, `collections` by qualified
/// name), as their canonical name.
pub fn container_builder(qualified: &str) -> Option<&'static str> {
    Some(match qualified {
        "list" => "list",
        "dict" => "dict",
        "set" => "set",
        "collections.defaultdict" => "defaultdict",
        "collections.OrderedDict" => "OrderedDict",
        "collections.deque" => "deque",
        "collections.Counter" => "Counter",
        _ => return None,
    })
}

/// Test-case classes whose `assert*` methods only read what they are given.
pub(crate) const TEST_CASE_CLASSES: &[&str] = &["unittest.TestCase", "unittest.case.TestCase"];

/// Methods that store their argument in the object they are called on.
pub(crate) const STORING_METHODS: &[&str] = &[
    "append", "extend", "insert", "put", "put_data", "push", "add", "update", "store", "record", "setdefault",
    "appendleft", "put_nowait", "register_buffer",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_calls() {
        assert_eq!(call_model("torch.nn.Linear"), Some(Call::BuildsNetwork));
        assert_eq!(call_model("torch.nn.CrossEntropyLoss"), Some(Call::BuildsLoss));
        assert_eq!(call_model("torch.nn.NLLLoss2d"), Some(Call::BuildsLoss));
        assert_eq!(call_model("torch.nn.functional.relu"), Some(Call::TensorOp));
        assert_eq!(call_model("torch.nn.Parameter"), Some(Call::NewTensor));
        assert_eq!(call_model("torch.optim.Adam"), Some(Call::BuildsOptimizer));
        assert_eq!(call_model("torch.optim.lr_scheduler.StepLR"), Some(Call::Other));
        assert_eq!(call_model("torch.cuda.amp.GradScaler"), Some(Call::BuildsScaler));
        assert_eq!(call_model("torch.utils.data.DataLoader"), Some(Call::BuildsLoader));
        assert_eq!(call_model("torch.zeros"), Some(Call::NewTensor));
        assert_eq!(call_model("torch.cat"), Some(Call::TensorOp));
        assert_eq!(call_model("torch.no_grad"), Some(Call::DisablesGrad));
        assert_eq!(call_model("torch.compile"), Some(Call::ReturnsFirstArgument));
    }

    #[test]
    fn model_zoos_and_hubs() {
        assert_eq!(call_model("torchvision.models.resnet50"), Some(Call::BuildsNetwork));
        assert_eq!(call_model("torchvision.models.ResNet50_Weights"), Some(Call::Other));
        assert_eq!(call_model("timm.create_model"), Some(Call::BuildsNetwork));
        assert_eq!(call_model("transformers.AutoModel.from_pretrained"), Some(Call::BuildsNetwork));
        assert_eq!(call_model("transformers.AutoTokenizer.from_pretrained"), Some(Call::Other));
        assert_eq!(call_model("transformers.GPT2LMHeadModel"), Some(Call::BuildsNetwork));
        assert_eq!(call_model("transformers.BertForSequenceClassification"), Some(Call::BuildsNetwork));
        assert_eq!(call_model("transformers.GPT2Config"), Some(Call::Other));
        assert_eq!(call_model("transformers.Trainer"), Some(Call::Other));
        assert_eq!(call_model("diffusers.UNet2DModel"), Some(Call::BuildsNetwork));
        assert_eq!(call_model("diffusers.DDPMScheduler.from_pretrained"), Some(Call::Other));
    }

    #[test]
    fn other_frameworks_are_foreign() {
        assert_eq!(call_model("numpy.asarray"), Some(Call::Foreign));
        assert_eq!(call_model("jax.device_get"), Some(Call::Foreign));
        assert_eq!(call_model("flax.linen.Dense"), Some(Call::Foreign));
        assert_eq!(call_model("tensorflow.constant"), Some(Call::Foreign));
        assert_eq!(call_model("somelib.thing"), None);
    }

    #[test]
    fn module_classes() {
        assert!(library_module_class("torch.nn.Module"));
        assert!(library_module_class("lightning.pytorch.LightningModule"));
        assert!(!library_module_class("torch.nn.Parameter"));
        assert!(!library_module_class("torch.utils.data.Dataset"));
        assert!(library_module_factory("torchvision.models.resnet18"));
        assert!(!library_module_factory("torch.nn.functional.relu"));
    }

    #[test]
    fn tensor_methods() {
        assert_eq!(tensor_method("item"), Call::Number);
        assert_eq!(tensor_method("detach"), Call::TensorNoHistory);
        assert_eq!(tensor_method("numpy"), Call::Foreign);
        assert_eq!(tensor_method("mean"), Call::TensorOp);
    }
}
