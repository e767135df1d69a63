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
//! The network is followed through names bound to it by methods that return the module
//! itself (`vgg = vgg.eval().to(device)`) and into the functions of the same module it is
//! handed to (`train(loader, vgg=vgg)`: the parameter `vgg` holds it there).
//!
//! Not flagged, because the network may be trained or is already frozen: its
//! `.parameters()` / `named_parameters()` are used anywhere it is followed (an optimizer,
//! a freezing loop), `requires_grad_(...)` is called on it, it is passed to a call of
//! anything but a plain function of this module (a method, a parameter, an import, `*args`),
//! put in a container, aliased or returned (memlint cannot follow it there), it is a
//! submodule of an `nn.Module` class (the parent's parameters may go to an optimizer), or
//! every forward pass runs under `torch.no_grad()` / `inference_mode()`.
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

use memlint_python::{parameter_name, NodeExt};
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
            let object = model.field(network, "object").map(|o| model.text(o));
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
        let mut forwards: Vec<Node> = Vec::new();
        let scope = model.enclosing_function(statement).map(|f| f.node).unwrap_or(model.root());
        let holder = Holder { name: name.clone(), target: network, statement, scope };
        if !follow(model, &holder, 0, &mut forwards) {
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
            .with_fix(freeze_fix(model, statement, &name))
            .with_evidence(vec![
                memlint_python::Fact::at(format!("`{name}` is a pretrained network: {what}"), value),
                memlint_python::Fact::at(format!("no optimizer is given `{name}`'s parameters and nothing freezes them"), statement),
                memlint_python::Fact::at(format!("`{shown_forward}` runs with gradients enabled, in a module that backpropagates"), *tracked),
            ]),
        );
    }
}

/// How the value is a pretrained network, for the message.
fn pretrained_source<'t>(model: &SemanticModel<'t>, value: Node<'t>) -> Option<String> {
    let mut node = value;
    for _ in 0..16 {
        match node.kind_name() {
            "parenthesized_expression" => node = node.named_child(0)?,
            "subscript" => node = model.field(node, "value")?,
            "attribute" => node = model.field(node, "object")?,
            "call" => {
                let callee = model.field(node, "function")?;
                let method = model.field(callee, "attribute").map(|a| model.text(a));
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
                node = model.field(callee, "object")?;
            }
            _ => return None,
        }
    }
    None
}

/// A name holding the network: bound by `statement` (its construction, a re-binding such
/// as `x = x.to(device)`, or a parameter of a function it was handed to), usable in `scope`.
struct Holder<'t> {
    name: String,
    /// The name's node where it is bound (left out of its uses).
    target: Node<'t>,
    statement: Node<'t>,
    scope: Node<'t>,
}

/// How many re-bindings and calls of local functions the network is followed through.
const MAX_FOLLOW: usize = 4;

/// Follows the network through every use of `holder`: pushes its forward passes to
/// `forwards`, and answers false when it escapes (trained, frozen, or out of sight).
/// `x = x.to(device)` (a method that returns the module itself) and handing it to a
/// function of this module (`train(net=vgg)`) are followed into the new name or the
/// parameter.
fn follow<'t>(model: &SemanticModel<'t>, holder: &Holder<'t>, depth: usize, forwards: &mut Vec<Node<'t>>) -> bool {
    if depth > MAX_FOLLOW {
        return false;
    }
    for u in uses_of(model, holder) {
        match classify_use(model, u) {
            Use::Forward(call) => forwards.push(call),
            Use::Other => {}
            Use::Rebound(next) | Use::HandedTo(next) => {
                if !follow(model, &next, depth + 1, forwards) {
                    return false;
                }
            }
            Use::Escapes => return false,
        }
    }
    true
}

/// Every use of the holder's name that refers to its binding: looked up in the semantic
/// model's index of names, within the scope the name can be used in.
fn uses_of<'t>(model: &SemanticModel<'t>, holder: &Holder<'t>) -> Vec<Node<'t>> {
    let name = holder.name.as_str();
    let uses: Vec<Node<'t>> = match name.split_once('.') {
        // `self.<attr>` is followed through the whole class.
        Some((_, attr)) => {
            let class = ancestors(model, holder.statement).find(|n| n.kind_name() == "class_definition");
            let scope = class.unwrap_or(model.root());
            model
                .attributes_named_in(attr, scope.byte_range())
                .iter()
                .copied()
                .filter(|n| model.dotted_name(*n).as_deref() == Some(name))
                .collect()
        }
        // A plain name through the scope it is bound in (and the scopes nested there).
        None => model
            .identifiers_named_in(name, holder.scope.byte_range())
            .iter()
            .copied()
            .filter(|n| {
                let parent = model.parent(*n);
                let is_attribute_part = parent
                    .filter(|p| p.kind_name() == "attribute")
                    .and_then(|p| model.field(p, "attribute"))
                    .map(|a| a.id() == n.id())
                    .unwrap_or(false);
                let is_keyword = parent
                    .map(|p| p.kind_name() == "keyword_argument" && model.field(p, "name").map(|k| k.id()) == Some(n.id()))
                    .unwrap_or(false);
                !is_attribute_part
                    && !is_keyword
                    && model.binding_at(name, *n).map(|b| b.statement.id() == holder.statement.id()).unwrap_or(false)
            })
            .collect(),
    };
    uses.into_iter().filter(|n| n.id() != holder.target.id()).collect()
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
    /// Bound to a name again through methods that return the module itself
    /// (`vgg = vgg.to(device)`): the new name holds it too.
    Rebound(Holder<'t>),
    /// Handed to a function of this module: its parameter holds it there.
    HandedTo(Holder<'t>),
    /// Trained, frozen, or out of sight: the rule does not apply.
    Escapes,
}

/// Methods of `nn.Module` that return the module itself.
const RETURNS_SELF: &[&str] = &["eval", "to", "cuda", "cpu", "half", "float", "bfloat16"];

fn classify_use<'t>(model: &SemanticModel<'t>, node: Node<'t>) -> Use<'t> {
    let Some(parent) = node.parent() else { return Use::Escapes };
    match parent.kind_name() {
        "call" if model.field(parent, "function").map(|f| f.id()) == Some(node.id()) => Use::Forward(parent),
        "attribute" if model.field(parent, "object").map(|o| o.id()) == Some(node.id()) => {
            let attr = model.field(parent, "attribute").map(|a| model.text(a)).unwrap_or("");
            let called = parent.parent().filter(|c| c.kind_name() == "call" && c.field("function").map(|f| f.id()) == Some(parent.id()));
            match (attr, called) {
                (a, Some(call)) if FORWARD_METHODS.contains(&a) => Use::Forward(call),
                (a, Some(call)) if RETURNS_SELF.contains(&a) => rebound(model, call).map_or(Use::Other, Use::Rebound),
                // `.parameters()`, `.requires_grad_()`, `.train()`, `.state_dict()`, a
                // submodule (`vgg.features`), ...: trained, frozen, or not followed.
                _ => Use::Escapes,
            }
        }
        // `vgg.eval()` as a statement of its own, `if vgg is None`.
        "comparison_operator" | "not_operator" | "boolean_operator" => Use::Other,
        // The name bound again (`vgg = vgg.to(device)`): not a use of the value it held.
        "assignment" if model.field(parent, "left").map(|l| l.id()) == Some(node.id()) => Use::Other,
        "argument_list" => handed_to(model, parent, node).map_or(Use::Escapes, Use::HandedTo),
        "keyword_argument" if model.field(parent, "value").map(|v| v.id()) == Some(node.id()) => {
            match parent.parent().filter(|a| a.kind_name() == "argument_list") {
                Some(arguments) => handed_to(model, arguments, node).map_or(Use::Escapes, Use::HandedTo),
                None => Use::Escapes,
            }
        }
        _ => Use::Escapes,
    }
}

/// `x = <network>.to(device)` (through any chain of [`RETURNS_SELF`] methods): the name
/// it is bound to, when the chain is the whole right side of an assignment to one name.
fn rebound<'t>(model: &SemanticModel<'t>, call: Node<'t>) -> Option<Holder<'t>> {
    let mut end = call;
    // `vgg.eval().to(device)`: the chain's outermost call.
    while let Some(attribute) = end.parent().filter(|p| p.kind_name() == "attribute" && p.field("object").map(|o| o.id()) == Some(end.id())) {
        let attr = model.field(attribute, "attribute").map(|a| model.text(a)).unwrap_or("");
        let outer = attribute.parent().filter(|c| c.kind_name() == "call" && c.field("function").map(|f| f.id()) == Some(attribute.id()))?;
        if !RETURNS_SELF.contains(&attr) {
            return None;
        }
        end = outer;
    }
    let assignment = end.parent().filter(|p| p.kind_name() == "assignment" && p.field("right").map(|r| r.id()) == Some(end.id()))?;
    let target = model.field(assignment, "left").filter(|l| l.kind_name() == "identifier")?;
    let statement = assignment.parent().filter(|p| p.kind_name() == "expression_statement")?;
    let scope = model.enclosing_function(statement).map(|f| f.node).unwrap_or(model.root());
    Some(Holder { name: model.text(target).to_owned(), target, statement, scope })
}

/// `f(vgg)` / `f(net=vgg)` where `f` is a plain function defined in this module (not a
/// method, not decorated): its parameter that receives `value`, an argument (or a keyword
/// argument's value) in `arguments`.
fn handed_to<'t>(model: &SemanticModel<'t>, arguments: Node<'t>, value: Node<'t>) -> Option<Holder<'t>> {
    let call = arguments.parent().filter(|c| c.kind_name() == "call")?;
    let callee = model.field(call, "function").filter(|f| f.kind_name() == "identifier")?;
    let binding = model.binding_at(model.text(callee), callee)?;
    let function = model.function(binding.statement)?;
    if function.class.is_some() || !function.decorators.is_empty() {
        return None;
    }
    // Parameters after `*args` (or the bare `*`) are passed by keyword only.
    let mut by_position = true;
    for (position, parameter) in model.named_children(function.node.field("parameters")?).into_iter().enumerate() {
        let Some(target) = parameter_name(parameter) else {
            by_position = false;
            continue;
        };
        let argument = model.argument_for(call, model.text(target), by_position.then_some(position));
        if argument.is_some_and(|a| a.id() == value.id()) {
            return Some(Holder { name: model.text(target).to_owned(), target, statement: parameter, scope: function.node });
        }
    }
    None
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
