//! ## What it does
//! Checks for a pretrained network used only as a fixed feature extractor or loss network
//! (a VGG for a perceptual loss, a teacher for distillation, a frozen text encoder) whose
//! parameters still require grad and whose forward pass runs with autograd on, in a module
//! that trains (calls `backward()`).
//!
//! A network counts as pretrained when it is built by `X.from_pretrained(...)`,
//! `torchvision.models.<arch>(weights=...)` / `(pretrained=True)`,
//! `timm.create_model(..., pretrained=True)` or `torch.hub.load(...)` (also through
//! `.features`, slicing, `.eval()`, `.to(device)`), or is an instance of a class, defined
//! here or in another module of the project, whose `__init__` loads one that the class
//! neither freezes nor runs without autograd (it never mentions `requires_grad`,
//! `no_grad` or `inference_mode`). `from_pretrained` of a tokenizer,
//! processor, feature extractor, configuration, scheduler or pipeline loads no network,
//! and PEFT's `PeftModel` / `AutoPeftModel*.from_pretrained` (without `is_trainable=True`)
//! loads one already frozen.
//!
//! Not flagged, because the network may be trained or is already frozen: its
//! `.parameters()` / `named_parameters()` are used anywhere (an optimizer, a freezing
//! loop), `requires_grad_(...)` is called on it, it is passed to a call, put in a
//! container, aliased or returned (memlint cannot follow it there), it is a submodule of
//! an `nn.Module` class (the parent's parameters may go to an optimizer), or every forward
//! pass runs under `torch.no_grad()` / `inference_mode()`.
//!
//! ## Why is this bad?
//! `.eval()` does not stop autograd. While the network's parameters require grad, every
//! forward pass through it records a graph that saves the activations needed to compute
//! gradients *for its weights*, and every `backward()` computes those gradients and
//! allocates a `.grad` buffer per parameter (as much memory as the weights, kept for the
//! whole run) that nothing ever uses. For a loss network the gradient with respect to its
//! input is still needed, but not the weights' gradients; for a feature extractor or
//! teacher, not even the graph.
//!
//! ## Example
//! ```python
//! vgg = torchvision.models.vgg16(weights="IMAGENET1K_V1").features[:16].eval().cuda()
//! optimizer = torch.optim.Adam(generator.parameters())
//! for x, target in loader:
//!     fake = generator(x)
//!     loss = F.mse_loss(vgg(fake), vgg(target))
//!     loss.backward()
//! ```
//!
//! Use instead:
//! ```python
//! vgg = torchvision.models.vgg16(weights="IMAGENET1K_V1").features[:16].eval().cuda()
//! vgg.requires_grad_(False)
//! optimizer = torch.optim.Adam(generator.parameters())
//! for x, target in loader:
//!     fake = generator(x)
//!     loss = F.mse_loss(vgg(fake), vgg(target))
//!     loss.backward()
//! ```
//!
//! ## Fix safety
//! The fix adds `<network>.requires_grad_(False)` on the line after the construction. It
//! is unsafe: gradients still flow through the network to its inputs, but its outputs on
//! inputs that do not require grad (`vgg(target)`) no longer require grad themselves, so
//! code that backpropagates from such an output alone now fails; and code memlint cannot
//! see that reads the network's `.grad`s (gradient logging, another module that builds an
//! optimizer from it) gets `None`. It is not offered when the construction shares its
//! line with other code.

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::SemanticModel;

use crate::prefilter::Words;
use crate::rules::{could_run_backward};
use crate::checker::Checker;
use crate::rules::{keyword_argument, line_end_inclusive, line_indent, owns_its_lines};
use crate::{Diagnostic, Edit, Fix, Severity};

pub const SUMMARY: &str = "Frozen pretrained network still tracks gradients";
pub const CAPTURES: &[&str] = &["construction", "network", "value"];
pub const FIXABLE: bool = true;

/// The trigger: what a file must contain for this rule to report anything in it.
/// A pretrained-network source (`from_pretrained`, torchvision, timm, `torch.hub`, or a
/// class of the project, whose `__init__` may load one) and a backward pass.
pub fn trigger(words: &Words<'_>) -> bool {
    (["from_pretrained", "torchvision", "timm", "hub"].iter().any(|w| words.contains(w)) || words.project_values())
        && could_run_backward(words)
}

/// Methods of a network that run its forward pass (besides calling it).
const FORWARD_METHODS: &[&str] = &[
    "forward", "forward_features", "encode", "decode", "get_text_features", "get_image_features", "extract_features", "encode_image", "encode_text",
];

pub fn check(checker: &mut Checker<'_, '_>) {
    let model = checker.model;
    if model.calls_named("backward").is_empty() && model.calls_named("grad").is_empty() {
        return;
    }
    for m in checker.matches() {
        let (Some(construction), Some(network), Some(value)) = (m.get("construction"), m.get("network"), m.get("value")) else {
            continue;
        };
        let Some(name) = model.dotted_name(network) else { continue };
        if network.kind_name() == "attribute" {
            // `self.<attr>` only, and not as a submodule of an `nn.Module` (the parent's
            // parameters may be optimized).
            let object = network.field("object").map(|o| model.text(o));
            if object != Some("self") || name.matches('.').count() != 1 {
                continue;
            }
            let class = model.enclosing_function(construction).and_then(|f| f.class.clone());
            match class {
                Some(c) if !model.is_module_class(&c) => {}
                _ => continue,
            }
        }
        let Some(what) = pretrained_source(model, value) else { continue };
        let Some(statement) = construction.parent().filter(|p| p.kind_name() == "expression_statement") else { continue };
        let uses = uses_of(model, &name, network, statement);
        let mut forwards: Vec<Node> = Vec::new();
        let mut escapes = false;
        for u in &uses {
            match classify_use(model, *u) {
                Use::Forward(call) => forwards.push(call),
                Use::Other => {}
                Use::Escapes => escapes = true,
            }
        }
        if escapes {
            continue;
        }
        forwards.sort_by_key(|c| c.start_byte());
        let Some(tracked) = forwards.iter().find(|c| !model.grad_context(**c).is_disabled()) else { continue };
        let shown_forward = crate::rules::snippet(model, *tracked);
        checker.report(
            Diagnostic::new(
                checker.rule,
                value.byte_range(),
                format!(
                    "`{name}` is a pretrained network ({what}) never given to an optimizer, but its parameters still require grad and `{shown_forward}` runs with autograd on: every step records its graph and `backward()` allocates and computes a gradient for each of its weights (as much memory as the weights) that nothing uses"
                ),
            )
            .with_help(format!("freeze it with `{name}.requires_grad_(False)` (and run it under `torch.no_grad()` when no gradient has to flow through it)"))
            .with_severity(Severity::Warning)
            .with_fix(freeze_fix(model, statement, &name)),
        );
    }
}

/// How the value is a pretrained network, for the message.
fn pretrained_source<'t>(model: &SemanticModel<'t>, value: Node<'t>) -> Option<String> {
    let mut node = value;
    for _ in 0..16 {
        match node.kind_name() {
            "parenthesized_expression" => node = node.named_child(0)?,
            "subscript" => node = node.field("value")?,
            "attribute" => node = node.field("object")?,
            "call" => {
                let callee = node.field("function")?;
                let method = callee.field("attribute").map(|a| model.text(a));
                if method == Some("requires_grad_") {
                    // Already frozen (or explicitly trainable) in the chain.
                    return None;
                }
                let keyword = |name: &str| keyword_argument(model, node, name).map(|v| model.text(v).to_owned());
                if method == Some("from_pretrained") {
                    // Not a tokenizer; not PEFT's `PeftModel.from_pretrained(base, path)`,
                    // loaded frozen for inference.
                    let shown = model.dotted_name(callee).unwrap_or_else(|| "from_pretrained".into());
                    return memlint_python::loads_pretrained_network(&shown, &keyword).then(|| format!("`{shown}`"));
                }
                // An instance of a class (here or in the project) whose `__init__` loads one.
                if let Some(class) = model.dotted_name(callee) {
                    if let Some(inner) = model.class_loads_pretrained_network(&class) {
                        return Some(format!("`{class}`, which loads `{inner}`"));
                    }
                }
                if let Some(q) = model.qualified_name(callee) {
                    let shown = format!("`{}`", model.text(callee));
                    return memlint_python::loads_pretrained_network(&q, &keyword).then_some(shown);
                }
                node = callee.field("object")?;
            }
            _ => return None,
        }
    }
    None
}

/// Every use of the network's name that refers to this construction: looked up in the
/// semantic model's index of names, within the scope the name can be used in.
fn uses_of<'t>(model: &SemanticModel<'t>, name: &str, target: Node<'t>, statement: Node<'t>) -> Vec<Node<'t>> {
    let uses: Vec<Node<'t>> = match name.split_once('.') {
        // `self.<attr>` is followed through the whole class.
        Some((_, attr)) => {
            let class = ancestors(model, statement).find(|n| n.kind_name() == "class_definition");
            let scope = class.unwrap_or(model.root());
            model
                .attributes_named_in(attr, scope.byte_range())
                .iter()
                .copied()
                .filter(|n| model.dotted_name(*n).as_deref() == Some(name))
                .collect()
        }
        // A plain name through the scope it is bound in (and the scopes nested there).
        None => {
            let scope = model.enclosing_function(statement).map(|f| f.node).unwrap_or(model.root());
            model
                .identifiers_named_in(name, scope.byte_range())
                .iter()
                .copied()
                .filter(|n| {
                    let parent = model.parent(*n);
                    let is_attribute_part = parent
                        .filter(|p| p.kind_name() == "attribute")
                        .and_then(|p| p.field("attribute"))
                        .map(|a| a.id() == n.id())
                        .unwrap_or(false);
                    let is_keyword = parent
                        .map(|p| p.kind_name() == "keyword_argument" && p.field("name").map(|k| k.id()) == Some(n.id()))
                        .unwrap_or(false);
                    !is_attribute_part
                        && !is_keyword
                        && model.binding_at(name, *n).map(|b| b.statement.id() == statement.id()).unwrap_or(false)
                })
                .collect()
        }
    };
    uses.into_iter().filter(|n| n.id() != target.id()).collect()
}

/// `node`'s ancestors, innermost first.
fn ancestors<'a, 't>(model: &'a SemanticModel<'t>, node: Node<'t>) -> impl Iterator<Item = Node<'t>> + 'a {
    std::iter::successors(model.parent(node), move |n| model.parent(*n))
}

enum Use<'t> {
    /// A forward pass through the network.
    Forward(Node<'t>),
    /// A use that neither trains nor hides it (`.eval()`, `.to(device)`).
    Other,
    /// Trained, frozen, or out of sight: the rule does not apply.
    Escapes,
}

fn classify_use<'t>(model: &SemanticModel<'t>, node: Node<'t>) -> Use<'t> {
    let Some(parent) = node.parent() else { return Use::Escapes };
    match parent.kind_name() {
        "call" if parent.field("function").map(|f| f.id()) == Some(node.id()) => Use::Forward(parent),
        "attribute" if parent.field("object").map(|o| o.id()) == Some(node.id()) => {
            let attr = parent.field("attribute").map(|a| model.text(a)).unwrap_or("");
            let called = parent.parent().filter(|c| c.kind_name() == "call" && c.field("function").map(|f| f.id()) == Some(parent.id()));
            match (attr, called) {
                (a, Some(call)) if FORWARD_METHODS.contains(&a) => Use::Forward(call),
                ("eval" | "to" | "cuda" | "cpu" | "half" | "float" | "bfloat16", Some(_)) => Use::Other,
                // `.parameters()`, `.requires_grad_()`, `.train()`, `.state_dict()`, a
                // submodule (`vgg.features`), ...: trained, frozen, or not followed.
                _ => Use::Escapes,
            }
        }
        // `vgg.eval()` as a statement of its own, `if vgg is None`.
        "comparison_operator" | "not_operator" | "boolean_operator" => Use::Other,
        _ => Use::Escapes,
    }
}

fn freeze_fix(model: &SemanticModel<'_>, statement: Node<'_>, name: &str) -> Option<Fix> {
    let source = model.source();
    if !owns_its_lines(source, statement) || !matches!(statement.parent().map(|p| p.kind_name()), Some("block" | "module")) {
        return None;
    }
    let indent = line_indent(source, statement.start_byte());
    let end = line_end_inclusive(source, statement.end_byte().saturating_sub(1));
    let newline = if source[..end].ends_with('\n') { "" } else { "\n" };
    Some(Fix::unsafe_(
        format!("Add `{name}.requires_grad_(False)` after construction"),
        vec![Edit::insert(end, format!("{newline}{indent}{name}.requires_grad_(False)\n"))],
    ))
}
