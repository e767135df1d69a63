//! The summary of one definition, computed from its body alone: [`FunctionSummary`]
//! (arguments stored beyond the call, callees whose result it returns, the parameter it
//! gives back, the tuple it returns, whether it backpropagates) and [`ClassSummary`]
//! (bases, methods, pretrained loads of `__init__`, `self.X = Callee(...)` attributes).
//! The semantic model also asks it about the linted module's own classes and functions
//! (`class_summary_in`, over the named nodes of the model's walk; `returned_parameter`).
//!
//! Asks [`super::syntax`] for node readings, `crate::semantic` for parameters and
//! `crate::library` whether a class may freeze what it loads. Callees stay as spelled:
//! resolving them is [`super::resolve`]'s.

use rustc_hash::FxHashSet as HashSet;

use tree_sitter::Node;

use super::summary::{ClassSummary, FunctionSummary, PretrainedCall, StoreKind, StoredArgument, PRETRAINED_KEYWORDS};
use super::syntax::{decorator_disables_grad, dotted, parameter_free_stores, returned_callee_of, runs_backward, text, with_items_disabling_grad, NodeKind};
use crate::named_nodes::NamedNodes;
use crate::semantic::{named_children, unparenthesize};
use crate::NodeExt;

/// The summary of a class definition, its walks stepping through `nodes` (the named nodes
/// of the module's walk, or of the class's own).
pub(crate) fn class_summary_in<'t>(source: &str, class: Node<'t>, nodes: &NamedNodes<'t>) -> ClassSummary {
    let name = nodes.field_of(class, "name").map(|n| text(source, n).to_owned()).unwrap_or_default();
    let bases = class
        .field("superclasses")
        .map(|s| nodes.named_children_of(s).into_iter().filter_map(|b| dotted(source, b)).collect())
        .unwrap_or_default();
    let mut methods = Vec::new();
    let mut pretrained_calls = Vec::new();
    let mut attributes = Vec::new();
    let mut freezes = false;
    if let Some(body) = nodes.field_of(class, "body") {
        let may_freeze = crate::library::class_may_freeze(text(source, body));
        for item in nodes.named_children_of(body) {
            let (def, decorators) = match item.kind_name() {
                "function_definition" => (item, Vec::new()),
                "decorated_definition" => match nodes.field_of(item, "definition").filter(|d| d.kind_name() == "function_definition") {
                    Some(def) => (
                        def,
                        nodes.named_children_of(item).into_iter().filter(|c| c.kind_name() == "decorator").filter_map(|d| d.named_child(0)).collect(),
                    ),
                    None => continue,
                },
                _ => continue,
            };
            let is_static = decorators.iter().any(|d| text(source, *d) == "staticmethod");
            let mut f = function_summary(source, def, !is_static, nodes);
            // `cls(...)` in a classmethod builds an instance of this class (or a subclass),
            // and `cls.build(...)` calls another of its methods.
            if decorators.iter().any(|d| text(source, *d) == "classmethod") {
                if let Some(first) = nodes.field_of(def, "parameters").and_then(|p| p.named_child(0)).and_then(crate::parameter_name).map(|n| text(source, n)) {
                    for callee in f.returns_calls.iter_mut() {
                        if callee == first {
                            *callee = name.clone();
                        } else if let Some(rest) = callee.strip_prefix(first).and_then(|r| r.strip_prefix('.')) {
                            *callee = format!("{name}.{rest}");
                        }
                    }
                }
            }
            f.no_grad = decorators.iter().any(|d| decorator_disables_grad(source, *d));
            // A decorator memlint cannot read (`@nograd`, a project function wrapping the
            // method in `torch.no_grad()`) may change how the method runs.
            f.unread_decorator = !f.no_grad
                && decorators.iter().any(|d| !matches!(text(source, *d), "staticmethod" | "classmethod" | "property" | "abstractmethod" | "abc.abstractmethod" | "override" | "typing.override"));
            if f.name == "__init__" {
                freezes = nodes.field_of(def, "body").is_some_and(|b| crate::library::body_may_freeze_parameters(text(source, b)));
            }
            if f.name == "__init__" && !may_freeze {
                if let Some(init_body) = nodes.field_of(def, "body") {
                    nodes.within(init_body, |nodes, at| pretrained_calls_in(source, nodes, at, &mut pretrained_calls));
                }
            }
            if let Some(method_body) = nodes.field_of(def, "body") {
                nodes.within(method_body, |nodes, at| attribute_calls(source, nodes, at, &mut attributes));
            }
            methods.push(f);
        }
    }
    let parameter_free = nodes.field_of(class, "body").and_then(|body| nodes.within(body, |nodes, at| parameter_free_stores(source, nodes, at)));
    ClassSummary { name, bases, methods, pretrained_calls, attributes, may_freeze: freezes, parameter_free }
}

/// `self.X = Callee(...)` (through methods that return the module) under the node at `at`.
fn attribute_calls(source: &str, nodes: &NamedNodes<'_>, at: usize, out: &mut Vec<(String, String)>) {
    let mut stack = vec![at];
    while let Some(i) = stack.pop() {
        match NodeKind::at(nodes, i) {
            kind if kind.is_nested_scope() => continue,
            NodeKind::Assignment => {
                let n = nodes.node(i);
                if let (Some(left), Some(right)) = (nodes.field_of(n, "left"), nodes.field_of(n, "right")) {
                    if left.kind_name() == "attribute" && nodes.field_of(left, "object").is_some_and(|o| text(source, o) == "self") {
                        if let (Some(attr), Some(callee)) = (nodes.field_of(left, "attribute"), returned_callee_of(source)(right)) {
                            if unparenthesize(right).kind_name() == "call" {
                                out.push((text(source, attr).to_owned(), callee));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        stack.extend(nodes.children(i));
    }
}

/// The calls under the node at `at` that may load a pretrained network: `from_pretrained`,
/// a call given `pretrained=` or `weights=`, a `load` (`torch.hub.load`).
fn pretrained_calls_in(source: &str, nodes: &NamedNodes<'_>, at: usize, out: &mut Vec<PretrainedCall>) {
    let mut stack = vec![at];
    while let Some(i) = stack.pop() {
        let kind = NodeKind::at(nodes, i);
        if kind.is_nested_scope() && i != at {
            continue;
        }
        if kind == NodeKind::Call {
            let n = nodes.node(i);
            if let Some(callee) = nodes.field_of(n, "function").and_then(|f| dotted(source, f)) {
                let keywords: Vec<(String, String)> = n
                    .field("arguments")
                    .map(named_children)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|a| a.kind_name() == "keyword_argument")
                    .filter_map(|a| Some((text(source, nodes.field_of(a, "name")?).to_owned(), text(source, nodes.field_of(a, "value")?).to_owned())))
                    .filter(|(k, _)| PRETRAINED_KEYWORDS.contains(&k.as_str()))
                    .collect();
                let last = callee.rsplit('.').next().unwrap_or(&callee);
                if last == "from_pretrained" || last == "load" || keywords.iter().any(|(k, _)| k != "is_trainable") {
                    out.push(PretrainedCall { callee, keywords });
                }
            }
        }
        stack.extend(nodes.children(i));
    }
}


/// The parameters of a function: (name, position a caller passes it at).
fn parameters<'t>(source: &str, def: Node<'t>, method: bool, nodes: &NamedNodes<'t>) -> Vec<String> {
    let Some(params) = nodes.field_of(def, "parameters") else { return Vec::new() };
    let mut names = Vec::new();
    for p in nodes.named_children_of(params) {
        // `*args`, `**kwargs` and the bare `*` end the positional parameters we track.
        match crate::semantic::parameter_name(p) {
            Some(i) => names.push(text(source, i).to_owned()),
            None => break,
        }
    }
    if method && !names.is_empty() {
        names.remove(0);
    }
    names
}

/// The statements of a body, nested blocks included, nested functions and classes not.
fn statements_of<'t>(nodes: &NamedNodes<'t>, body: usize, out: &mut Vec<Node<'t>>) {
    for s in nodes.children(body) {
        match nodes.kind(s) {
            "expression_statement" | "return_statement" => out.push(nodes.node(s)),
            "block" | "else_clause" | "elif_clause" | "except_clause" | "finally_clause" | "if_statement" | "for_statement"
            | "while_statement" | "with_statement" | "try_statement" => statements_of(nodes, s, out),
            _ => {}
        }
    }
}

/// Does `expr` use `name` bare (itself, or as an operand of arithmetic), so that what is
/// stored is the argument with whatever history it carries (`val`, `val * n`), not a
/// number made of it (`val.item()`, `float(val)`)?
fn uses_bare(source: &str, expr: Node<'_>, name: &str) -> bool {
    let expr = unparenthesize(expr);
    match expr.kind_name() {
        "identifier" => text(source, expr) == name,
        "binary_operator" => {
            expr.field("left").map(|l| uses_bare(source, l, name)).unwrap_or(false)
                || expr.field("right").map(|r| uses_bare(source, r, name)).unwrap_or(false)
        }
        _ => false,
    }
}

/// The names the loops around `statement` (within its function) bind to elements of the
/// parameter `name`: `for v in name`, `for k, v in name.items()`, `for v in name.values()`.
fn loop_elements_of<'t>(source: &str, statement: Node<'t>, name: &str, nodes: &NamedNodes<'t>) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = nodes.parent_of(statement);
    while let Some(n) = current {
        if matches!(n.kind_name(), "function_definition" | "lambda" | "class_definition") {
            break;
        }
        if n.kind_name() == "for_statement" {
            let iterable = n.field("right").map(unparenthesize);
            let over = iterable.is_some_and(|i| {
                let i = match i.field("function").filter(|_| i.kind_name() == "call") {
                    Some(callee) if callee.kind_name() == "attribute" && callee.field("attribute").is_some_and(|a| matches!(text(source, a), "items" | "values")) => {
                        callee.field("object").map(unparenthesize).unwrap_or(i)
                    }
                    _ => i,
                };
                i.kind_name() == "identifier" && text(source, i) == name
            });
            if over {
                if let Some(left) = n.field("left") {
                    let mut stack = vec![left];
                    while let Some(t) = stack.pop() {
                        if t.kind_name() == "identifier" {
                            found.push(text(source, t).to_owned());
                        }
                        stack.extend(named_children(t));
                    }
                }
            }
        }
        current = nodes.parent_of(n);
    }
    found
}

/// The attributes of `self` a method calls or hands to a call (`self.pnet(x)`,
/// `detect_face(img, self.pnet)`, `self.detect(img)`; `""` for `self(...)`), split by
/// whether a `with torch.no_grad()` block is around the use. Nested definitions are
/// their own.
/// `body`: the index of the method's body in `nodes`.
fn self_uses_at(source: &str, nodes: &NamedNodes<'_>, body: usize) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut with_grad: Vec<String> = Vec::new();
    let mut without_grad: Vec<String> = Vec::new();
    let mut called_with_grad: Vec<String> = Vec::new();
    let self_attribute = |n: Node<'_>| -> Option<String> {
        let n = unparenthesize(n);
        match n.kind_name() {
            "identifier" if text(source, n) == "self" => Some(String::new()),
            "attribute" if nodes.field_of(n, "object").is_some_and(|o| text(source, o) == "self") => nodes.field_of(n, "attribute").map(|a| text(source, a).to_owned()),
            _ => None,
        }
    };
    let mut stack: Vec<(usize, bool)> = vec![(body, false)];
    while let Some((i, off)) = stack.pop() {
        let n = nodes.node(i);
        match NodeKind::at(nodes, i) {
            kind if kind.is_nested_scope() => continue,
            NodeKind::With => {
                // The items of its `with_clause`, then its body (as `with_items_disabling_grad`
                // gives them).
                let (_, disables) = with_items_disabling_grad(source, n);
                let clause = nodes.children(i).find(|c| nodes.kind(*c) == "with_clause");
                stack.extend(clause.into_iter().flat_map(|c| nodes.children(c)).map(|item| (item, off)));
                let body = nodes.field_of(n, "body").map(|b| b.id());
                if let Some(inner) = nodes.children(i).find(|c| Some(nodes.node(*c).id()) == body) {
                    stack.push((inner, off || disables));
                }
                continue;
            }
            NodeKind::Call => {
                let mut used: Vec<String> = Vec::new();
                if let Some(callee) = nodes.field_of(n, "function") {
                    if let Some(called) = self_attribute(callee) {
                        if !off && !called_with_grad.contains(&called) {
                            called_with_grad.push(called.clone());
                        }
                        used.push(called);
                    }
                }
                if let Some(arguments) = nodes.field_of(n, "arguments").and_then(|a| nodes.child_with_id(i, a)) {
                    for a in nodes.children(arguments) {
                        let node = nodes.node(a);
                        let a = if nodes.kind(a) == "keyword_argument" { nodes.field_of(node, "value").unwrap_or(node) } else { node };
                        used.extend(self_attribute(a));
                    }
                }
                let into = if off { &mut without_grad } else { &mut with_grad };
                for u in used {
                    if !into.contains(&u) {
                        into.push(u);
                    }
                }
            }
            _ => {}
        }
        stack.extend(nodes.children(i).map(|c| (c, off)));
    }
    (with_grad, without_grad, called_with_grad)
}

/// Is `target` state that outlives a call: `self.x`, `self.x[k]`, or a module-level name
/// (a `global`, or any name the function does not bind)?
fn outliving_target(source: &str, target: Node<'_>, locals: &HashSet<String>) -> Option<String> {
    let t = unparenthesize(target);
    match t.kind_name() {
        "attribute" => {
            let d = dotted(source, t)?;
            (d.starts_with("self.") || d.starts_with("cls.")).then_some(d)
        }
        "subscript" => outliving_target(source, t.field("value")?, locals),
        // `getattr(self, k).append(v)`: an attribute of the instance chosen at run time.
        "call" => {
            let callee = t.field("function")?;
            let first = t.field("arguments").and_then(|a| a.named_child(0))?;
            (text(source, callee) == "getattr" && matches!(text(source, first), "self" | "cls")).then(|| "self.<attribute>".to_owned())
        }
        "identifier" => {
            let n = text(source, t);
            (!locals.contains(n)).then(|| n.to_owned())
        }
        _ => None,
    }
}

/// The summary of a function (a method when `method`), its walks stepping through `nodes`
/// (the named nodes of the module's walk, or of its class's, or its own).
pub(super) fn function_summary(source: &str, def: Node<'_>, method: bool, nodes: &NamedNodes<'_>) -> FunctionSummary {
    let name = nodes.field_of(def, "name").map(|n| text(source, n).to_owned()).unwrap_or_default();
    let params = parameters(source, def, method, nodes);
    let mut statements = Vec::new();
    let body = nodes.field_of(def, "body");
    if let Some(body) = body {
        nodes.within(body, |nodes, at| statements_of(nodes, at, &mut statements));
    }
    // Names the function binds (parameters and assignment targets): not module state.
    let mut locals: HashSet<String> = params.iter().cloned().collect();
    if method {
        locals.insert("self".to_owned());
    }
    let mut rebound: HashSet<String> = HashSet::default();
    let mut local_calls: Vec<(String, String)> = Vec::new();
    for s in &statements {
        let Some(e) = s.named_child(0) else { continue };
        if e.kind_name() == "assignment" {
            if let Some(left) = nodes.field_of(e, "left") {
                if left.kind_name() == "identifier" {
                    let n = text(source, left).to_owned();
                    if params.contains(&n) {
                        rebound.insert(n.clone());
                    }
                    if let Some(callee) = nodes.field_of(e, "right").and_then(returned_callee_of(source)) {
                        local_calls.push((n.clone(), callee));
                    }
                    locals.insert(n);
                }
            }
        }
    }
    let mut stores = Vec::new();
    let mut returns_calls = Vec::new();
    for s in &statements {
        if s.kind_name() == "return_statement" {
            if let Some(value) = s.named_child(0) {
                if let Some(callee) = returned_callee_of(source)(value) {
                    // `return m` / `return m.to(dev)` after `m = Net()`.
                    match local_calls.iter().rev().find(|(n, _)| *n == callee) {
                        Some((_, c)) => returns_calls.push(c.clone()),
                        None if !locals.contains(callee.split('.').next().unwrap_or("")) || callee.contains('.') => {
                            returns_calls.push(callee)
                        }
                        None => {}
                    }
                }
            }
            continue;
        }
        let Some(e) = s.named_child(0) else { continue };
        let stored = match e.kind_name() {
            // `self.total += val`
            "augmented_assignment" if nodes.field_of(e, "operator").map(|o| text(source, o) == "+=").unwrap_or(true) => {
                nodes.field_of(e, "left").zip(nodes.field_of(e, "right")).map(|(l, r)| (l, r, StoreKind::Accumulates))
            }
            // `self.total = self.total + val`
            "assignment" => nodes.field_of(e, "left").zip(nodes.field_of(e, "right")).filter(|(l, r)| {
                r.kind_name() == "binary_operator" && r.field("left").map(|rl| text(source, rl) == text(source, *l)).unwrap_or(false)
            }).map(|(l, r)| (l, r, StoreKind::Accumulates)),
            // `self.values.append(val)`
            "call" => {
                let callee = nodes.field_of(e, "function").filter(|c| c.kind_name() == "attribute");
                let method_name = callee.and_then(|c| nodes.field_of(c, "attribute")).map(|a| text(source, a));
                match (callee.and_then(|c| nodes.field_of(c, "object")), method_name, nodes.field_of(e, "arguments").and_then(|a| a.named_child(0))) {
                    (Some(obj), Some("append" | "extend" | "add" | "put" | "appendleft"), Some(arg)) => Some((obj, arg, StoreKind::Appends)),
                    _ => None,
                }
            }
            _ => None,
        };
        let Some((target, value, kind)) = stored else { continue };
        let Some(into) = outliving_target(source, target, &locals) else { continue };
        for (position, p) in params.iter().enumerate() {
            if rebound.contains(p) {
                continue;
            }
            // The parameter itself, or an element of it taken by a loop around the store
            // (`for k, v in data.items(): getattr(self, k).append(v)`).
            let elements = loop_elements_of(source, *s, p, nodes);
            let stores_it = uses_bare(source, value, p) || elements.iter().any(|e| uses_bare(source, value, e));
            if stores_it && !stores.iter().any(|s: &StoredArgument| s.position == position) {
                stores.push(StoredArgument { position, name: p.clone(), kind, into: into.clone() });
            }
        }
    }
    let backprops = body.is_some_and(|b| runs_backward(source, b));
    // The method each `return` ends with (`return t.cpu().detach().numpy()`).
    let returned_methods: Vec<Option<String>> = statements
        .iter()
        .filter(|s| s.kind_name() == "return_statement")
        .map(|s| {
            let value = unparenthesize(s.named_child(0)?);
            let callee = nodes.field_of(value, "function").filter(|c| value.kind_name() == "call" && c.kind_name() == "attribute")?;
            nodes.field_of(callee, "attribute").map(|a| text(source, a).to_owned())
        })
        .collect();
    let returns_method = match returned_methods.first() {
        Some(Some(first)) if returned_methods.iter().all(|m| m.as_deref() == Some(first.as_str())) => Some(first.clone()),
        _ => None,
    };
    // Every `return` gives no tensor: none has a value, or each gives a literal, a number
    // (`.item()`), numpy (`.numpy()`, `np.mean(accs)`, also through a local name).
    let returns_no_tensor = statements.iter().filter(|s| s.kind_name() == "return_statement").all(|s| {
        let Some(value) = s.named_child(0).map(unparenthesize) else { return true };
        if matches!(value.kind_name(), "integer" | "float" | "string" | "true" | "false" | "none" | "concatenated_string") {
            return true;
        }
        if let Some(method) = nodes.field_of(value, "function").filter(|c| value.kind_name() == "call" && c.kind_name() == "attribute").and_then(|c| nodes.field_of(c, "attribute")) {
            if matches!(crate::library::tensor_method(text(source, method)), crate::library::Call::Number | crate::library::Call::Foreign) {
                return true;
            }
        }
        let Some(callee) = returned_callee_of(source)(value) else { return false };
        let callee = local_calls.iter().rev().find(|(n, _)| *n == callee).map(|(_, c)| c.clone()).unwrap_or(callee);
        crate::library::call_gives_no_tensor(&callee)
    });
    let returns_parameter = returned_parameter(source, def, &statements, nodes).and_then(|p| params.iter().position(|n| *n == p));
    let returns_called_parameter = returned_called_parameter(source, &statements)
        .filter(|p| !rebound.contains(p))
        .and_then(|p| params.iter().position(|n| *n == p));
    let returns_elements = statements
        .iter()
        .filter(|s| s.kind_name() == "return_statement")
        .filter_map(|s| s.named_child(0).map(unparenthesize))
        .find(|v| matches!(v.kind_name(), "expression_list" | "tuple"))
        .map(|tuple| {
            named_children(tuple)
                .into_iter()
                .map(|element| {
                    let callee = returned_callee_of(source)(element)?;
                    match local_calls.iter().rev().find(|(n, _)| *n == callee) {
                        Some((_, c)) => Some(c.clone()),
                        None if unparenthesize(element).kind_name() == "call" => Some(callee),
                        None => None,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let (self_used_with_grad, self_used_without_grad, self_called_with_grad) = match body {
        Some(body) if method => nodes.within(body, |nodes, at| self_uses_at(source, nodes, at)),
        _ => (Vec::new(), Vec::new(), Vec::new()),
    };
    FunctionSummary {
        name,
        no_grad: false,
        returns_calls,
        stores,
        backprops,
        returns_parameter,
        returns_called_parameter,
        returns_elements,
        returns_method,
        self_used_with_grad,
        self_used_without_grad,
        self_called_with_grad,
        unread_decorator: false,
        returns_no_tensor,
    }
}

/// The parameter every `return` of a function gives back (through methods that return
/// the module, and both branches of a conditional), by name. `statements`: the function's
/// statements (nested blocks included).
/// The name every `return` among `statements` calls (`return model_cls(**cfg)`, through
/// methods that return the module: `return cls().cuda()`), if they all call one name; the
/// caller checks it is a parameter.
fn returned_called_parameter(source: &str, statements: &[Node<'_>]) -> Option<String> {
    let mut found: Option<String> = None;
    for s in statements.iter().filter(|s| s.kind_name() == "return_statement") {
        let mut value = unparenthesize(s.named_child(0)?);
        // Down the methods that return the module to the call that built it.
        loop {
            let callee = value.field("function").filter(|_| value.kind_name() == "call")?;
            match callee.kind_name() {
                "identifier" => break,
                "attribute" if callee.field("attribute").is_some_and(|a| crate::library::MODULE_METHODS_RETURNING_SELF.contains(&text(source, a))) => {
                    value = unparenthesize(callee.field("object")?);
                }
                _ => return None,
            }
        }
        let called = text(source, value.field("function")?).to_owned();
        if found.as_ref().is_some_and(|f| *f != called) {
            return None;
        }
        found = Some(called);
    }
    found
}

pub(crate) fn returned_parameter<'t>(source: &str, def: Node<'t>, statements: &[Node<'t>], nodes: &NamedNodes<'t>) -> Option<String> {
    // No `return`, no parameter returned: the parameters are not read (most functions).
    if !statements.iter().any(|s| s.kind_name() == "return_statement") {
        return None;
    }
    let params = nodes.field_of(def, "parameters").map(|p| nodes.named_children_of(p)).unwrap_or_default();
    let names: Vec<&str> = params.iter().filter_map(|p| crate::semantic::parameter_name(*p)).map(|n| text(source, n)).collect();
    let mut found: Option<String> = None;
    let mut returns = 0;
    for s in statements.iter().filter(|s| s.kind_name() == "return_statement") {
        returns += 1;
        let value = s.named_child(0)?;
        let mut pending = vec![value];
        while let Some(v) = pending.pop() {
            let v = unparenthesize(v);
            match v.kind_name() {
                "conditional_expression" => {
                    let parts = nodes.named_children_of(v);
                    pending.extend([parts.first(), parts.get(2)].into_iter().flatten().copied());
                }
                _ => {
                    let returned = returned_callee_of(source)(v)?;
                    if !names.contains(&returned.as_str()) || found.as_ref().is_some_and(|f| *f != returned) {
                        return None;
                    }
                    // Only through methods that return the module: a call of the parameter
                    // itself (`return x(y)`) gives its result, not it.
                    if unparenthesize(v).kind_name() == "call" && returned_callee_of(source)(unparenthesize(v)).as_deref() == Some(returned.as_str()) {
                        let mut inner = unparenthesize(v);
                        while inner.kind_name() == "call" {
                            let callee = nodes.field_of(inner, "function")?;
                            if callee.kind_name() != "attribute" {
                                return None;
                            }
                            inner = unparenthesize(nodes.field_of(callee, "object")?);
                        }
                    }
                    found = Some(returned);
                }
            }
        }
    }
    if returns == 0 {
        return None;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summaries of the top-level functions of `source` (as plain functions).
    fn functions(source: &str) -> Vec<FunctionSummary> {
        let parsed = crate::parse(source);
        named_children(parsed.tree.root_node())
            .into_iter()
            .filter(|d| d.kind_name() == "function_definition")
            .map(|d| function_summary(source, d, false, &NamedNodes::of(d)))
            .collect()
    }

    /// The summary of the first class of `source`.
    fn class(source: &str) -> ClassSummary {
        let parsed = crate::parse(source);
        let def = named_children(parsed.tree.root_node()).into_iter().find(|d| d.kind_name() == "class_definition").expect("a class");
        let summary = class_summary_in(source, def, &NamedNodes::of(def));
        let in_the_module = class_summary_in(source, def, &NamedNodes::of(parsed.tree.root_node()));
        assert_eq!(format!("{in_the_module:?}"), format!("{summary:?}"), "the class's own walk or the module's: the same summary");
        summary
    }

    fn stored(name: &str, position: usize, kind: StoreKind, into: &str) -> StoredArgument {
        StoredArgument { position, name: name.to_owned(), kind, into: into.to_owned() }
    }

    #[test]
    fn arguments_stored_beyond_the_call() {
        let meter = class(
            "class Meter:\n    def update(self, val, n):\n        self.total += val * n\n        self.items.append(val.item())\n\
             \n        HISTORY.extend(n)\n        count = 0\n        count += val\n",
        );
        assert_eq!(
            meter.methods[0].stores,
            [stored("val", 0, StoreKind::Accumulates, "self.total"), stored("n", 1, StoreKind::Accumulates, "self.total")],
            "`self` is not counted; a number made of an argument (`val.item()`) and a local total are not stores"
        );
        let f = functions(
            "def log(x):\n    HISTORY.append(x)\n\ndef detached(x):\n    x = x.detach()\n    HISTORY.append(x)\n\n\
             def total(x):\n    TOTAL += x\n",
        );
        assert_eq!(f[0].stores, [stored("x", 0, StoreKind::Appends, "HISTORY")]);
        assert_eq!(f[1].stores, [], "a parameter bound again is not the argument");
        assert_eq!(f[2].stores, [stored("x", 0, StoreKind::Accumulates, "TOTAL")]);
        let sum = class("class Sum:\n    def add(self, x):\n        self.sum = self.sum + x\n");
        assert_eq!(sum.methods[0].stores, [stored("x", 0, StoreKind::Accumulates, "self.sum")]);
    }

    #[test]
    fn what_a_function_returns_and_whether_it_backpropagates() {
        let f = functions(
            "def build(cfg):\n    m = Net(cfg)\n    m.cuda()\n    return m\n\n\
             def build2(cfg):\n    return nets.Net(cfg).to(dev)\n\n\
             def passthrough(model, flag):\n    if flag:\n        return model.cuda()\n    return model.cuda() if flag else model\n\n\
             def call(fn, x):\n    return fn(x)\n\n\
             def both():\n    model = Net()\n    opt = torch.optim.SGD(model.parameters())\n    return model, opt, 3\n\n\
             def step(loss):\n    loss.backward()\n",
        );
        assert_eq!(f[0].returns_calls, ["Net"], "through the function's assignment");
        assert_eq!(f[1].returns_calls, ["nets.Net"]);
        assert_eq!(f[2].returns_parameter, Some(0), "every return gives `model` back, through `.cuda()` and a conditional");
        assert!(f[2].returns_calls.is_empty());
        assert_eq!(f[3].returns_parameter, None, "a call of the parameter gives its result, not it");
        assert_eq!(f[3].returns_called_parameter, Some(0), "what calling the parameter gives");
        assert_eq!(f[2].returns_called_parameter, None);
        assert_eq!(f[0].returns_called_parameter, None, "`Net` is no parameter");
        assert_eq!(f[4].returns_elements, [Some("Net".to_owned()), Some("torch.optim.SGD".to_owned()), None]);
        assert!(f[5].backprops && !f[0].backprops);
        assert!(f.iter().all(|f| !f.no_grad), "no_grad is the decorator's, set by the caller");
    }

    #[test]
    fn a_class_summary() {
        let net = class(
            "class Net(nn.Module, Mixin):\n    def __init__(self):\n        super().__init__()\n\
             \n        self.encoder = nn.Sequential(nn.Linear(2, 2)).cuda()\n\
             \n        self.backbone = timm.create_model('resnet18', pretrained=True)\n        self.count = 0\n\
             \n    @staticmethod\n    def make(x):\n        return x\n",
        );
        assert_eq!(net.name, "Net");
        assert_eq!(net.bases, ["nn.Module", "Mixin"]);
        let mut attributes = net.attributes.clone();
        attributes.sort();
        assert_eq!(attributes, [("backbone".to_owned(), "timm.create_model".to_owned()), ("encoder".to_owned(), "nn.Sequential".to_owned())]);
        assert_eq!(
            net.pretrained_calls,
            [PretrainedCall { callee: "timm.create_model".to_owned(), keywords: vec![("pretrained".to_owned(), "True".to_owned())] }]
        );
        let methods: Vec<&str> = net.methods.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(methods, ["__init__", "make"]);
        assert_eq!(net.methods[1].returns_parameter, Some(0), "a static method's first parameter is an argument");

        let frozen = class(
            "class Frozen(nn.Module):\n    def __init__(self):\n        self.backbone = timm.create_model('vit', pretrained=True)\n\
             \n    @torch.no_grad()\n    def predict(self, x):\n        return self.backbone(x)\n",
        );
        assert!(frozen.pretrained_calls.is_empty(), "a class that may freeze what it loads (it mentions no_grad)");
        assert!(frozen.methods[1].no_grad);
    }
}
