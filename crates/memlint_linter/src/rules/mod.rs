//! One module per rule. Each module's doc comment is the rule's documentation
//! (`memlint rule <name>` prints it); each exports `SUMMARY`, `CAPTURES`, `FIXABLE`,
//! `trigger` and `check` — or, for a rule marked `after_suppression` in the registry,
//! `check_after_suppression`, which runs once the other rules' findings were suppressed
//! and reads which suppression comments were used (`unused-noqa`).

pub mod accumulated_loss_tensor;
pub mod accumulation_without_loss_division;
pub mod data_parallel;
pub mod deprecated_cuda_amp;
pub mod empty_cache_in_loop;
pub mod eval_without_no_grad;
pub mod frozen_network_tracks_grad;
pub mod gpu_tensors_collected;
pub mod half_without_grad_scaler;
pub mod retain_graph_in_loop;
pub mod torch_load_without_map_location;
pub mod unused_noqa;
pub mod zero_grad_keeps_memory;

use memlint_python::NodeExt;
use memlint_python::tree_sitter::Node;
use memlint_python::{unparenthesize, BindingKind, SemanticModel, ValueKind};

use crate::prefilter::Words;
use crate::Edit;

// ----- trigger helpers ---------------------------------------------------------------
// Necessary conditions over a file's words that several rules' triggers share. Each
// mirrors what the semantic model needs to decide a fact, so it may only ever be weaker.

/// Could some value be a network, a loss or a tensor with history: what builds one (a
/// `Module` subclass, `torch.nn`, the model zoos and hubs the library table models), a
/// method only modules have called on something (`x.eval()`, `x.parameters()`), or a
/// class or factory imported from the project. (The semantic model knows a network only
/// by these facts: a name is never evidence.)
pub(crate) fn could_hold_a_model(words: &Words<'_>) -> bool {
    words.project_values()
        || ["Module", "LightningModule", "ModelMixin", "PreTrainedModel", "nn", "torchvision", "timm", "transformers", "diffusers", "peft", "hub"]
            .iter()
            .any(|w| words.has(w))
        || memlint_python::MODULE_ONLY_METHODS.iter().any(|w| words.called(w))
}

/// Could `backward()` or `torch.autograd.grad` be called?
pub(crate) fn could_run_backward(words: &Words<'_>) -> bool {
    words.called("backward") || words.called("grad")
}

/// Could an optimizer (or a `GradScaler`) be stepped: `.step()` called, and an optimizer
/// built (`torch.optim`, apex), known by use (`zero_grad()` with `step()`,
/// `param_groups`, Lightning's `optimizers()`), a scaler, or one from the project?
pub(crate) fn could_step_an_optimizer(words: &Words<'_>) -> bool {
    words.called("step")
        && (words.has("optim")
            || words.has("optimizers")
            || words.has("apex")
            || words.has("GradScaler")
            || words.called("zero_grad")
            || words.has("param_groups")
            || words.project_values())
}

/// Could a loop go over batches: a `DataLoader`, or a backward pass, an optimizer step or
/// a forward pass somewhere?
pub(crate) fn could_loop_over_batches(words: &Words<'_>) -> bool {
    words.has("DataLoader") || could_run_backward(words) || could_step_an_optimizer(words) || could_hold_a_model(words)
}

/// The leading whitespace of the line `offset` is on.
pub(crate) fn line_indent(source: &str, offset: usize) -> &str {
    let start = line_start(source, offset);
    let rest = &source[start..];
    let len = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    &rest[..len]
}

/// Byte offset of the start of the line `offset` is on.
pub(crate) fn line_start(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].rfind('\n').map(|i| i + 1).unwrap_or(0)
}

/// Byte offset just past the line break of the line `offset` is on (or the end of text).
pub(crate) fn line_end_inclusive(source: &str, offset: usize) -> usize {
    source[offset.min(source.len())..].find('\n').map(|i| offset + i + 1).unwrap_or(source.len())
}

/// The file's indentation unit: how far the first block on lines of its own is indented
/// past the statement that opens it, else four spaces. Read from the tree: a continuation
/// line (`help=...` under `parser.add_argument(`) is aligned, not indented, and a `:` in a
/// comment or a string opens nothing.
pub(crate) fn indent_unit(source: &str, root: Node<'_>) -> String {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.kind_name() == "block" {
            let mut cursor = node.walk();
            let first = node.named_children(&mut cursor).find(|c| c.kind_name() != "comment");
            if let (Some(first), Some(opener)) = (first, node.parent()) {
                if first.start_position().row > opener.start_position().row {
                    let (outer, inner) = (line_indent(source, opener.start_byte()), line_indent(source, first.start_byte()));
                    if inner.starts_with('\t') {
                        return "\t".to_owned();
                    }
                    if inner.len() > outer.len() {
                        return " ".repeat(inner.len() - outer.len());
                    }
                }
            }
        }
        // Depth first, in source order.
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    "    ".to_owned()
}

#[cfg(test)]
mod indent_tests {
    fn indent_unit(source: &str) -> String {
        super::indent_unit(source, memlint_python::parse_with(source, None).root_node())
    }

    #[test]
    fn the_unit_is_the_first_blocks_indentation() {
        assert_eq!(indent_unit("def f():\n  return 1\n"), "  ");
        assert_eq!(indent_unit("class A:  # a comment\n    def f(self):\n        pass\n"), "    ");
        assert_eq!(indent_unit("if x:\n\treturn\n"), "\t");
        assert_eq!(indent_unit("x = 1\n"), "    ");
    }

    #[test]
    fn a_continuation_line_is_not_a_block() {
        let source = "parser.add_argument('--train', action='store_true',\n                    help='# not a comment:')\n\ndef main():\n  return 1\n";
        assert_eq!(indent_unit(source), "  ");
        assert_eq!(indent_unit("x = {'a': 1,\n     'b': 2}\nif x:\n   pass\n"), "   ");
    }
}

/// Does the statement start its line and end it (nothing else shares its lines)?
pub(crate) fn owns_its_lines(source: &str, node: Node<'_>) -> bool {
    let before = &source[line_start(source, node.start_byte())..node.start_byte()];
    let after_end = line_end_inclusive(source, node.end_byte().saturating_sub(1).max(node.start_byte()));
    let after = &source[node.end_byte()..after_end.max(node.end_byte())];
    before.trim().is_empty() && (after.trim().is_empty() || after.trim_start().starts_with('#'))
}

/// Does `node` contain a string literal that spans lines (re-indenting would change it)?
pub(crate) fn has_multiline_string(node: Node<'_>) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind_name() == "string" && n.start_position().row != n.end_position().row {
            return true;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

/// Edits that indent every non-blank line of `node`'s lines by `unit`.
pub(crate) fn indent_lines(source: &str, node: Node<'_>, unit: &str) -> Vec<Edit> {
    let mut edits = Vec::new();
    let mut offset = line_start(source, node.start_byte());
    while offset < node.end_byte() {
        let end = line_end_inclusive(source, offset);
        if !source[offset..end].trim().is_empty() {
            edits.push(Edit::insert(offset, unit));
        }
        if end == offset {
            break;
        }
        offset = end;
    }
    edits
}

/// The calls whose callee may resolve to one of `qualified` (fully qualified names): a
/// dotted callee ends with the name's last part, a bare one is that part or a name an
/// import binds to the whole name (`from torch.cuda.amp import autocast as ac`).
pub(crate) fn calls_that_may_resolve_to<'t>(model: &SemanticModel<'t>, qualified: &[&str]) -> Vec<Node<'t>> {
    let mut names: Vec<&str> = qualified.iter().map(|q| q.rsplit('.').next().unwrap_or(q)).collect();
    for q in qualified {
        names.extend(model.names_imported_as(q));
    }
    names.sort_unstable();
    names.dedup();
    names.iter().flat_map(|n| model.calls_named(n).iter().copied()).collect()
}

/// How to spell `torch` here, and an edit that imports it when the module does not.
pub(crate) fn torch_name(model: &SemanticModel<'_>) -> (String, Option<Edit>) {
    if let Some(local) = model.local_name_for("torch") {
        return (local.to_owned(), None);
    }
    // Insert `import torch` before the first top-level import, else at the top (after a
    // docstring and `from __future__` imports, which must stay first).
    let source = model.source();
    let mut insert_at = 0;
    let mut cursor = model.root().walk();
    for child in model.root().named_children(&mut cursor) {
        match child.kind_name() {
            "import_statement" | "import_from_statement" => {
                let is_future = child
                    .field("module_name")
                    .map(|m| model.text(m) == "__future__")
                    .unwrap_or(false);
                if is_future {
                    insert_at = line_end_inclusive(source, child.end_byte().saturating_sub(1));
                    continue;
                }
                insert_at = line_start(source, child.start_byte());
                break;
            }
            "expression_statement" if insert_at == 0 && child.named_child(0).map(|c| c.kind_name() == "string").unwrap_or(false) => {
                insert_at = line_end_inclusive(source, child.end_byte().saturating_sub(1));
            }
            "comment" => continue,
            _ => break,
        }
    }
    let mut text = "import torch\n".to_owned();
    if insert_at > 0 && !source[..insert_at].ends_with('\n') {
        text.insert(0, '\n');
    }
    ("torch".to_owned(), Some(Edit::insert(insert_at, text)))
}

/// A short, one-line rendering of a node's text for messages.
pub(crate) fn snippet(model: &SemanticModel<'_>, node: Node<'_>) -> String {
    let text = model.text(node);
    let first = text.lines().next().unwrap_or("");
    let mut shown: String = first.chars().take(60).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

// ----- call arguments ----------------------------------------------------------------

/// The value of a keyword argument `name=...` of `call`.
pub(crate) fn keyword_argument<'t>(model: &SemanticModel<'t>, call: Node<'t>, name: &str) -> Option<Node<'t>> {
    model.keyword_value(call, name)
}

/// The positional arguments of `call` (no keywords, no splats, no comments).
pub(crate) fn positional_arguments<'t>(call: Node<'t>) -> Vec<Node<'t>> {
    let Some(args) = call.field("arguments") else { return Vec::new() };
    let mut cursor = args.walk();
    let found = args
        .named_children(&mut cursor)
        .filter(|a| !matches!(a.kind_name(), "keyword_argument" | "list_splat" | "dictionary_splat" | "comment"))
        .collect();
    found
}

/// Does `call` pass `*args` or `**kwargs` (which may carry any argument)?
pub(crate) fn has_splat(call: Node<'_>) -> bool {
    let Some(args) = call.field("arguments") else { return false };
    let mut cursor = args.walk();
    let found = args.named_children(&mut cursor).any(|a| matches!(a.kind_name(), "list_splat" | "dictionary_splat"));
    found
}

/// Is `call`'s argument list a plain `( ... )` (not a generator expression argument)?
pub(crate) fn has_argument_list(call: Node<'_>) -> bool {
    call.field("arguments").map(|a| a.kind_name() == "argument_list").unwrap_or(false)
}

/// An edit that adds `text` (e.g. `map_location="cpu"`) as the last argument of `call`.
pub(crate) fn append_argument(model: &SemanticModel<'_>, call: Node<'_>, text: &str) -> Option<Edit> {
    let args = call.field("arguments").filter(|a| a.kind_name() == "argument_list")?;
    let mut cursor = args.walk();
    let last = args.named_children(&mut cursor).filter(|a| a.kind_name() != "comment").last();
    match last {
        Some(last) => Some(Edit::insert(last.end_byte(), format!(", {text}"))),
        None => {
            // `f()`: insert right after the opening parenthesis.
            let open = args.start_byte();
            (model.text(args).starts_with('(')).then(|| Edit::insert(open + 1, text.to_owned()))
        }
    }
}

/// Edits that call `suffix` (e.g. `.detach()`) on `expr`, parenthesizing it when needed.
pub(crate) fn call_on(expr: Node<'_>, suffix: &str) -> Vec<Edit> {
    if is_primary(expr) {
        vec![Edit::insert(expr.end_byte(), suffix.to_owned())]
    } else {
        vec![Edit::insert(expr.start_byte(), "("), Edit::insert(expr.end_byte(), format!("){suffix}"))]
    }
}

/// An expression that binds tighter than any operator (a name, call, subscript, literal).
pub(crate) fn is_primary(expr: Node<'_>) -> bool {
    matches!(
        expr.kind_name(),
        "identifier" | "attribute" | "call" | "subscript" | "parenthesized_expression" | "integer" | "float" | "string" | "list" | "tuple" | "dictionary"
    )
}

// ----- tree walking --------------------------------------------------------------------

/// Every node under `node` (inclusive) that satisfies `predicate`, not looking into nested
/// functions, classes or lambdas (they run at another time).
/// Does the `if` statement `branch` step an optimizer in its consequence? Under gradient
/// accumulation (`if (i + 1) % accum_steps == 0: optimizer.step()`) that branch runs once
/// per update: every step, as far as memory is concerned.
pub(crate) fn branch_steps_an_optimizer<'t>(model: &SemanticModel<'t>, branch: Node<'t>) -> bool {
    branch
        .field("consequence")
        .map(|body| !descendants_where(model, body, |c| c.kind_name() == "call" && model.is_optimizer_step(c)).is_empty())
        .unwrap_or(false)
}

/// Is `definition` (a statement binding `name`) a lazy initialization, run once: in the
/// consequence of `if name is None:` (or `if not name:`)? Inside a loop it does not
/// create a fresh value each iteration (`if buf is None: buf = torch.zeros(...)`).
pub(crate) fn is_lazy_initialization<'t>(model: &SemanticModel<'t>, definition: Node<'t>, name: &str) -> bool {
    let Some(parent) = model.parent(definition) else { return false };
    let Some(if_statement) = model.parent(parent).filter(|p| p.kind_name() == "if_statement") else { return false };
    if model.field(if_statement, "consequence").map(|c| c.id()) != Some(parent.id()) {
        return false;
    }
    // `_gate = buf is None`, then `if _gate:`: the flag's test.
    let Some(condition) = model.field(if_statement, "condition").map(|c| unparenthesize(model.flag_value(c))) else { return false };
    let text: String = model.text(condition).split_whitespace().collect::<Vec<_>>().join(" ");
    text == format!("{name} is None") || text == format!("not {name}")
}

/// The functions of this module that `call` may run: those named as its callee's last
/// name part (`f(...)`, `self.f(...)`, `x.f(...)`).
pub(crate) fn local_functions_called<'a, 't>(model: &'a SemanticModel<'t>, call: Node<'t>) -> impl Iterator<Item = &'a memlint_python::FunctionInfo<'t>> + 'a {
    let name = model.field(call, "function").and_then(|callee| match callee.kind_name() {
        "identifier" => Some(model.text(callee)),
        "attribute" => model.field(callee, "attribute").map(|a| model.text(a)),
        _ => None,
    });
    model.functions().filter(move |f| name == Some(f.name.as_str()))
}

pub(crate) fn descendants_where<'t>(model: &SemanticModel<'t>, node: Node<'t>, predicate: impl Fn(Node<'t>) -> bool) -> Vec<Node<'t>> {
    let mut found = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.id() != node.id() && matches!(n.kind_name(), "function_definition" | "class_definition" | "lambda") {
            continue;
        }
        if predicate(n) {
            found.push(n);
        }
        stack.extend(model.named_children(n));
    }
    found.sort_by_key(|n| n.start_byte());
    found
}

/// Is `node` inside an annotation (`x: T`, `def f(a: T) -> T`)?
pub(crate) fn in_annotation(node: Node<'_>) -> bool {
    let mut child = node;
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind_name() {
            "type" => return true,
            "function_definition" => {
                return n.field("return_type").map(|r| r.id() == child.id()).unwrap_or(false);
            }
            "block" | "module" => return false,
            _ => {}
        }
        child = n;
        current = n.parent();
    }
    false
}

/// Is `value` the literal `expected` (`True`/`False`), or a name whose every assignment in
/// its scope is that literal?
pub(crate) fn always_bool<'t>(model: &SemanticModel<'t>, value: Node<'t>, expected: bool) -> bool {
    let literal = if expected { "true" } else { "false" };
    match value.kind_name() {
        k if k == literal => true,
        "identifier" => {
            let name = model.text(value);
            let Some(binding) = model.binding_at(name, value) else { return false };
            let statement = binding.statement;
            let in_scope = model.bindings_in_scope(name, statement);
            let all = if in_scope.iter().any(|b| b.statement.id() == statement.id()) {
                in_scope
            } else {
                std::slice::from_ref(binding)
            };
            !all.is_empty()
                && all.iter().all(|b| {
                    b.kind == memlint_python::BindingKind::Assign && b.value.map(|v| v.kind_name() == literal).unwrap_or(false)
                })
        }
        _ => false,
    }
}

/// A loss: computed by a loss module or a loss function of `torch.nn.functional`, the
/// `loss` field of a network's output, or a name that is backpropagated in its function
/// (`loss.backward()`), and what is computed from those. A running list of losses is
/// reported by `accumulated-loss-tensor`.
pub(crate) fn is_loss_like<'t>(model: &SemanticModel<'t>, expr: Node<'t>, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    let expr = unparenthesize(expr);
    match expr.kind_name() {
        "identifier" => {
            let name = model.text(expr);
            backpropagated_name(model, name, expr)
                || model
                    .binding_at(name, expr)
                    .and_then(|b| if b.kind == BindingKind::Assign { b.value } else { None })
                    .map(|v| is_loss_like(model, v, depth + 1))
                    .unwrap_or(false)
        }
        // `loss.data`: the loss's value (a number in PyTorch < 0.4 as `loss.data[0]`);
        // `outputs.loss`: the loss a transformers network computes.
        "attribute" => {
            let attr = model.field(expr, "attribute").map(|a| model.text(a)).unwrap_or("");
            let object = model.field(expr, "object");
            (attr == "loss" && object.is_some_and(|o| model.value_kind(o) == ValueKind::GradTensor))
                || (attr == "data" && object.map(|o| is_loss_like(model, o, depth + 1)).unwrap_or(false))
        }
        "subscript" => model.field(expr, "value").map(|v| is_loss_like(model, v, depth + 1)).unwrap_or(false),
        "binary_operator" => ["left", "right"]
            .iter()
            .any(|f| expr.field(f).map(|e| is_loss_like(model, e, depth + 1)).unwrap_or(false)),
        "call" => {
            let Some(callee) = model.field(expr, "function") else { return false };
            if model.value_kind(callee) == ValueKind::Loss {
                return true;
            }
            if let Some(q) = model.qualified_name(callee) {
                let last = q.rsplit('.').next().unwrap_or("");
                return q.starts_with("torch.nn.functional.")
                    && (last.contains("loss") || matches!(last, "cross_entropy" | "binary_cross_entropy" | "binary_cross_entropy_with_logits" | "kl_div" | "nll_loss"));
            }
            // `loss.mean()`, `loss.sum()`: a method on a loss.
            callee.kind_name() == "attribute"
                && model.field(callee, "object").map(|o| is_loss_like(model, o, depth + 1)).unwrap_or(false)
        }
        _ => false,
    }
}

/// Is `name` backpropagated in the function `at` is in (`name.backward()`,
/// `name.mean().backward()`, `(a + name).backward()`, `scaler.scale(name).backward()`,
/// `torch.autograd.grad(name, ...)`)? What a loss module or a forward pass is given is
/// an input of the loss, not the loss.
fn backpropagated_name<'t>(model: &SemanticModel<'t>, name: &str, at: Node<'t>) -> bool {
    model.backward_calls_in_scope_of(at).iter().any(|call| {
        let receiver = call.field("function").filter(|f| f.kind_name() == "attribute").and_then(|f| f.field("object"));
        let target = receiver.or_else(|| call.field("arguments").and_then(|a| a.named_child(0)));
        let mut stack: Vec<Node<'t>> = target.into_iter().collect();
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "identifier" if model.text(n) == name => return true,
                "call" => {
                    // A method of the value (`loss.mean()`), or a call that passes it on
                    // unchanged in kind (`scaler.scale(loss)`, `sum(losses)`): followed.
                    let Some(callee) = model.field(n, "function") else { continue };
                    if callee.kind_name() == "attribute" {
                        if let Some(object) = model.field(callee, "object") {
                            stack.push(object);
                        }
                    }
                    let computes_a_loss = model.value_kind(callee) == ValueKind::Loss || model.is_forward_call(n) || is_loss_function(model, callee);
                    if !computes_a_loss {
                        if let Some(args) = model.field(n, "arguments") {
                            stack.extend(model.named_children(args));
                        }
                    }
                }
                "keyword_argument" => stack.extend(model.field(n, "value")),
                _ => stack.extend(model.named_children(n)),
            }
        }
        false
    })
}

/// `F.cross_entropy`, `F.mse_loss`, any `torch.nn.functional` loss.
fn is_loss_function<'t>(model: &SemanticModel<'t>, callee: Node<'t>) -> bool {
    model.qualified_name(callee).is_some_and(|q| {
        let last = q.rsplit('.').next().unwrap_or("");
        q.starts_with("torch.nn.functional.")
            && (last.contains("loss") || matches!(last, "cross_entropy" | "binary_cross_entropy" | "binary_cross_entropy_with_logits" | "kl_div" | "nll_loss"))
    })
}


/// An accumulation into a parameter of a helper that a loop calls: `def step(x, total):
/// total += loss; return total` called as `total = step(x, total)` in the loop, or `def
/// step(x, outputs): outputs.append(out)` called as `step(x, outputs)`. Gives the statement
/// of that call and the caller's name for the accumulator: what survives the caller's loop.
/// `returned`: the helper must give the accumulator back and the caller bind it again (a
/// total rebound by `+=`), else it is mutated in place (a container).
pub(crate) fn accumulator_through_helper<'t>(model: &SemanticModel<'t>, statement: Node<'t>, base: &str, returned: bool) -> Option<(Node<'t>, String)> {
    if base.contains('.') || !model.enclosing_loops(statement).is_empty() {
        return None;
    }
    let function = model.enclosing_function(statement)?;
    let binding = model.bindings_in_scope(base, statement).iter().find(|b| b.kind == BindingKind::Parameter)?;
    let params = model.named_children(model.parent(binding.statement)?);
    let position = params.iter().filter_map(|p| memlint_python::parameter_name(*p)).position(|n| model.text(n) == base)?;
    let position = if function.class.is_some() { position.checked_sub(1)? } else { position };
    if returned {
        let returns_it = descendants_where(model, function.node.field("body")?, |n| n.kind_name() == "return_statement")
            .iter()
            .any(|r| r.named_child(0).is_some_and(|v| model.identifiers_in(v).iter().any(|i| i == base)));
        if !returns_it {
            return None;
        }
    }
    for call in model.calls_of_function(function) {
        if model.enclosing_loops(call).is_empty() {
            continue;
        }
        let argument = model.argument_for(call, base, Some(position)).map(unparenthesize)?;
        if argument.kind_name() != "identifier" {
            continue;
        }
        let caller_base = model.text(argument);
        let call_statement = statement_around(model, call);
        if returned {
            // `total = step(x, total)` (or a tuple target holding it).
            let assignment = call_statement.named_child(0).filter(|a| a.kind_name() == "assignment");
            let rebinds = assignment.and_then(|a| model.field(a, "left")).is_some_and(|left| model.identifiers_in(left).iter().any(|i| i == caller_base));
            if !rebinds {
                continue;
            }
        }
        return Some((call_statement, caller_base.to_owned()));
    }
    None
}

/// The statement (a child of a block or the module) around `node`.
pub(crate) fn statement_around<'t>(model: &SemanticModel<'t>, node: Node<'t>) -> Node<'t> {
    let mut current = node;
    while let Some(parent) = model.parent(current) {
        if matches!(parent.kind_name(), "block" | "module") {
            return current;
        }
        current = parent;
    }
    current
}
