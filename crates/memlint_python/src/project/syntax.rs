//! Syntax helpers the summary walks share: a node's text, a dotted name, whether a
//! call or decorator disables gradients, whether a body runs a backward pass, and the
//! callee a returned or assigned expression is built by.
//!
//! Owns only readings of single tree-sitter nodes; asks nothing of the rest of the
//! project layer. Depends on `crate::semantic` (node helpers) and `crate::library`
//! (`MODULE_METHODS_RETURNING_SELF`).

use tree_sitter::Node;

use crate::named_nodes::NamedNodes;
pub(super) use crate::semantic::dotted;
use crate::semantic::{named_children, unparenthesize};
use crate::NodeExt;

/// What the summaries' walks over every node of a body tell apart: a node's kind, read
/// from one table by kind id (`kind_table`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeKind {
    FunctionDefinition,
    DecoratedDefinition,
    ClassDefinition,
    Lambda,
    With,
    Call,
    Assignment,
    AugmentedAssignment,
    Return,
    Yield,
    Identifier,
    Other,
}

impl NodeKind {
    /// The kind of the node at `index` of `nodes`.
    pub(super) fn at(nodes: &NamedNodes<'_>, index: usize) -> NodeKind {
        static KINDS: std::sync::OnceLock<Vec<NodeKind>> = std::sync::OnceLock::new();
        let kinds = KINDS.get_or_init(|| {
            crate::kind_table(|kind| match kind {
                "function_definition" => NodeKind::FunctionDefinition,
                "decorated_definition" => NodeKind::DecoratedDefinition,
                "class_definition" => NodeKind::ClassDefinition,
                "lambda" => NodeKind::Lambda,
                "with_statement" => NodeKind::With,
                "call" => NodeKind::Call,
                "assignment" => NodeKind::Assignment,
                "augmented_assignment" => NodeKind::AugmentedAssignment,
                "return_statement" => NodeKind::Return,
                "yield" => NodeKind::Yield,
                "identifier" => NodeKind::Identifier,
                _ => NodeKind::Other,
            })
        });
        kinds.get(nodes.kind_id(index) as usize).copied().unwrap_or(NodeKind::Other)
    }

    /// A nested scope (a function or class definition, a lambda): what its body does is
    /// not the enclosing function's.
    pub(super) fn is_nested_scope(self) -> bool {
        matches!(self, NodeKind::FunctionDefinition | NodeKind::ClassDefinition | NodeKind::Lambda)
    }
}

pub(super) fn text<'s>(source: &'s str, node: Node<'_>) -> &'s str {
    &source[node.byte_range()]
}

/// The items of a `with` statement (`with a, b as c:`), and whether one of them disables
/// gradients for its body (`torch.no_grad()`, `torch.inference_mode()`,
/// `torch.set_grad_enabled(False)`, also bound with `as`).
pub(super) fn with_items_disabling_grad<'t>(source: &str, with: Node<'t>) -> (Vec<Node<'t>>, bool) {
    let items: Vec<Node<'t>> = named_children(with).into_iter().find(|c| c.kind_name() == "with_clause").map(named_children).unwrap_or_default();
    let disables = items.iter().any(|item| {
        let Some(mut value) = item.field("value") else { return false };
        if value.kind_name() == "as_pattern" {
            match value.named_child(0) {
                Some(v) => value = v,
                None => return false,
            }
        }
        value.kind_name() == "call" && disables_grad_call(source, value)
    });
    (items, disables)
}

/// `torch.no_grad()`, `torch.inference_mode()` (not `inference_mode(False)`),
/// `torch.set_grad_enabled(False)`.
pub(super) fn disables_grad_call(source: &str, call: Node<'_>) -> bool {
    let Some(name) = call.field("function").and_then(|f| dotted(source, f)) else { return false };
    let first_arg = call.field("arguments").and_then(|a| a.named_child(0)).map(|a| text(source, a));
    match name.rsplit('.').next().unwrap_or("") {
        "no_grad" => true,
        "inference_mode" => !first_arg.map(|a| a.ends_with("False")).unwrap_or(false),
        "set_grad_enabled" => first_arg.map(|a| a.ends_with("False")).unwrap_or(false),
        _ => false,
    }
}

/// Decorators that disable gradients (`@torch.no_grad()`, `@torch.inference_mode()`,
/// `@no_grad`).
pub(super) fn decorator_disables_grad(source: &str, decorator: Node<'_>) -> bool {
    let target = if decorator.kind_name() == "call" { decorator.field("function") } else { Some(decorator) };
    let Some(name) = target.and_then(|t| dotted(source, t)) else { return false };
    let last = name.rsplit('.').next().unwrap_or("");
    if last == "inference_mode" && decorator.kind_name() == "call" {
        let off = decorator.field("arguments").and_then(|a| a.named_child(0)).map(|a| text(source, a).ends_with("False"));
        return off != Some(true);
    }
    matches!(last, "no_grad" | "inference_mode")
}


/// What a class stores on `self`, when none of it could be a parameter or hold one: the
/// callees (as spelled) of the calls it stores, for the caller to judge (a padding layer, a
/// tensor factory), or `None` when the class may hold a parameter (it makes an
/// `nn.Parameter`, registers a parameter or a module, or stores a value that is neither a
/// constant, its own attribute, an argument with a constant default, nor a call).
pub(crate) fn parameter_free_stores(source: &str, nodes: &NamedNodes<'_>, at: usize) -> Option<Vec<String>> {
    let mut callees = Vec::new();
    let mut stack = vec![at];
    while let Some(i) = stack.pop() {
        match NodeKind::at(nodes, i) {
            NodeKind::Identifier => {
                if matches!(
                    text(source, nodes.node(i)),
                    "Parameter" | "ParameterList" | "ParameterDict" | "register_parameter" | "add_module" | "register_module" | "setattr" | "__setattr__" | "__dict__"
                ) {
                    return None;
                }
            }
            NodeKind::Assignment | NodeKind::AugmentedAssignment => {
                let n = nodes.node(i);
                let stores_on_self = nodes.field_of(n, "left").is_some_and(|left| names_self_attribute(source, left));
                if stores_on_self {
                    let value = nodes.field_of(n, "right")?;
                    stored_value_callees(source, value, &mut callees)?;
                }
            }
            _ => {}
        }
        stack.extend(nodes.children(i));
    }
    Some(callees)
}

/// Is `target` (or an element of it) `self.X`?
fn names_self_attribute(source: &str, target: Node<'_>) -> bool {
    match target.kind_name() {
        "attribute" => target.field("object").is_some_and(|o| text(source, o) == "self"),
        "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list" => named_children(target).into_iter().any(|t| names_self_attribute(source, t)),
        _ => false,
    }
}

/// Adds the callees of the calls `value` is built of to `out`; `None` when some part of it
/// could hold a parameter (a name that is not an argument with a constant default, another
/// object's attribute, a subscript, a comprehension).
fn stored_value_callees(source: &str, value: Node<'_>, out: &mut Vec<String>) -> Option<()> {
    let value = unparenthesize(value);
    match value.kind_name() {
        "integer" | "float" | "string" | "concatenated_string" | "true" | "false" | "none" => Some(()),
        "list" | "tuple" | "set" | "dictionary" | "pair" | "unary_operator" | "binary_operator" | "boolean_operator" | "comparison_operator"
        | "conditional_expression" | "not_operator" => {
            named_children(value).into_iter().filter(|c| c.kind_name() != "comment").try_for_each(|c| stored_value_callees(source, c, out))
        }
        "attribute" => value.field("object").filter(|o| text(source, *o) == "self").map(|_| ()),
        "identifier" => argument_with_constant_default(source, value).then_some(()),
        "call" => {
            // `torch.tensor(mean).view(1, 3, 1, 1)`: the call that builds it, through the
            // methods called on what it built.
            let mut call = value;
            loop {
                let callee = call.field("function")?;
                match callee.field("object").map(unparenthesize).filter(|o| callee.kind_name() == "attribute" && o.kind_name() == "call") {
                    Some(inner) => call = inner,
                    None => {
                        out.push(dotted(source, callee)?);
                        return Some(());
                    }
                }
            }
        }
        _ => None,
    }
}

/// Is `name` an argument of its function whose default is a constant (`size=224`,
/// `mean=None`): a value of that kind, not a network handed in?
fn argument_with_constant_default(source: &str, name: Node<'_>) -> bool {
    let mut node = name;
    while let Some(parent) = node.parent() {
        if parent.kind_name() == "function_definition" {
            let Some(parameters) = parent.field("parameters") else { return false };
            return named_children(parameters).into_iter().any(|p| {
                matches!(p.kind_name(), "default_parameter" | "typed_default_parameter")
                    && p.field("name").is_some_and(|n| text(source, n) == text(source, name))
                    && p.field("value").is_some_and(|v| {
                        matches!(unparenthesize(v).kind_name(), "integer" | "float" | "string" | "true" | "false" | "none" | "unary_operator")
                    })
            });
        }
        node = parent;
    }
    false
}

/// Does `node` (a body; nested functions included, conservatively) call `backward()` or
/// `autograd.grad` / `autograd.backward`?
pub(super) fn runs_backward(source: &str, node: Node<'_>) -> bool {
    if let Some(answer) = BackwardCalls::answer(source, node) {
        return answer;
    }
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind_name() == "call" && is_backward_call(source, n) {
            return true;
        }
        stack.extend(n.named_children(&mut cursor));
    }
    false
}

thread_local! {
    /// The module being summarized on this thread: its text's address and length, and the
    /// start of every call in it that [`runs_backward`] counts, in order.
    static BACKWARD_CALLS: std::cell::RefCell<Option<(usize, usize, Vec<usize>)>> = const { std::cell::RefCell::new(None) };
}

/// While alive, [`runs_backward`] on bodies of this module is a search in the positions of
/// its backward calls, found in one walk, instead of a walk of each body (every function
/// and scope of a module asks, and nested bodies were walked once per enclosing one).
pub(super) struct BackwardCalls;

impl BackwardCalls {
    pub(super) fn of_module(source: &str, root: Node<'_>) -> BackwardCalls {
        // A backward call's callee is an attribute ending with the identifier `backward`
        // or `grad` (see [`is_backward_call`]): the calls are found from those words in
        // the text, not by a walk of the whole tree.
        let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
        let bytes = source.as_bytes();
        let mut starts = Vec::new();
        for word in ["backward", "grad"] {
            for (at, _) in source.match_indices(word) {
                let end = at + word.len();
                if (at > 0 && is_word(bytes[at - 1])) || bytes.get(end).is_some_and(|b| is_word(*b)) {
                    continue;
                }
                let Some(identifier) = root.named_descendant_for_byte_range(at, end).filter(|n| n.kind_name() == "identifier" && n.start_byte() == at && n.end_byte() == end) else {
                    continue;
                };
                let Some(callee) = identifier.parent().filter(|p| p.kind_name() == "attribute" && p.field("attribute").is_some_and(|a| a.id() == identifier.id())) else {
                    continue;
                };
                let Some(call) = callee.parent().filter(|c| c.kind_name() == "call" && c.field("function").is_some_and(|f| f.id() == callee.id())) else {
                    continue;
                };
                if is_backward_call(source, call) {
                    starts.push(call.start_byte());
                }
            }
        }
        starts.sort_unstable();
        BACKWARD_CALLS.with(|c| *c.borrow_mut() = Some((source.as_ptr() as usize, source.len(), starts)));
        BackwardCalls
    }

    fn answer(source: &str, body: Node<'_>) -> Option<bool> {
        BACKWARD_CALLS.with(|c| {
            let c = c.borrow();
            let (address, len, starts) = c.as_ref()?;
            if *address != source.as_ptr() as usize || *len != source.len() {
                return None;
            }
            let first = starts.partition_point(|s| *s < body.start_byte());
            Some(starts.get(first).is_some_and(|s| *s < body.end_byte()))
        })
    }
}

impl Drop for BackwardCalls {
    fn drop(&mut self) {
        BACKWARD_CALLS.with(|c| *c.borrow_mut() = None);
    }
}

/// Is `call` `x.backward(...)`, `torch.autograd.grad(...)` or `autograd.backward`? (The
/// callee's text is read before its dotted name is built: most calls are neither, and
/// building a name allocates.)
fn is_backward_call(source: &str, call: Node<'_>) -> bool {
    // `loss.backward()`, also on any expression (`self.head(x).sum().backward()`).
    if call.field("function").is_some_and(|f| f.kind_name() == "attribute" && f.field("attribute").is_some_and(|a| text(source, a) == "backward")) {
        return true;
    }
    let callee = call.field("function").filter(|f| {
        let t = text(source, *f);
        t.ends_with("backward") || t.ends_with("grad")
    });
    callee.and_then(|f| dotted(source, f)).is_some_and(|c| c.ends_with(".backward") || c.ends_with("autograd.grad"))
}

/// For a returned or assigned expression: the dotted callee of the call it is, through
/// methods that return the module itself (`Net(cfg).cuda()` -> `Net`), or a plain name
/// (`m`, to look up in the function's assignments).
pub(super) fn returned_callee_of(source: &str) -> impl Fn(Node<'_>) -> Option<String> + '_ {
    move |value| {
        let mut v = unparenthesize(value);
        loop {
            match v.kind_name() {
                "identifier" => return Some(text(source, v).to_owned()),
                "call" => {
                    let callee = v.field("function")?;
                    if callee.kind_name() == "attribute" {
                        let method = callee.field("attribute").map(|a| text(source, a)).unwrap_or("");
                        if crate::library::MODULE_METHODS_RETURNING_SELF.contains(&method) {
                            v = unparenthesize(callee.field("object")?);
                            continue;
                        }
                    }
                    return dotted(source, callee);
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `check` on the expression of the first statement of `source`.
    fn expression<R>(source: &str, check: impl FnOnce(&str, Node<'_>) -> R) -> R {
        let parsed = crate::parse(source);
        let statement = parsed.tree.root_node().named_child(0).expect("a statement");
        check(source, statement.named_child(0).expect("an expression"))
    }

    /// For each top-level statement of `source`: does it run a backward pass, answered
    /// from the module's backward calls (found in its text) and by a walk of the statement
    /// (without them)? The two must agree.
    fn backward_by_statement(source: &str) -> Vec<bool> {
        let parsed = crate::parse(source);
        let root = parsed.tree.root_node();
        let walked: Vec<bool> = named_children(root).into_iter().map(|s| runs_backward(source, s)).collect();
        let _found = BackwardCalls::of_module(source, root);
        let answered: Vec<bool> = named_children(root).into_iter().map(|s| runs_backward(source, s)).collect();
        assert_eq!(walked, answered, "the module's backward calls and a walk disagree");
        answered
    }

    #[test]
    fn backward_calls_are_found_from_their_words() {
        let source = "loss.backward()
                      x.sum().backward(retain_graph=True)
                      torch.autograd.grad(y, x)
                      loss . backward ()
                      (loss
  .backward)()
                      backward(loss)
                      g = p.grad
                      s = 'loss.backward()'  # loss.backward()
                      torch.autograd.backward(loss)
                      from torch.autograd import grad
                      grad(y, x)
                      loss.backward_hook()
";
        // A parenthesized callee is not read as one (by either); the comment is a statement
        // of its own.
        assert_eq!(
            backward_by_statement(source),
            [true, true, true, true, false, false, false, false, false, true, false, false, false]
        );
    }

    /// Runs `check` on the decorator of the definition `source` starts with.
    fn decorator<R>(source: &str, check: impl FnOnce(&str, Node<'_>) -> R) -> R {
        let parsed = crate::parse(source);
        let definition = parsed.tree.root_node().named_child(0).expect("a definition");
        let decorator = definition.named_child(0).filter(|d| d.kind_name() == "decorator").expect("a decorator");
        check(source, decorator.named_child(0).expect("the decorator's expression"))
    }

    #[test]
    fn dotted_names_and_text() {
        assert_eq!(expression("torch.nn.Linear\n", dotted).as_deref(), Some("torch.nn.Linear"));
        assert_eq!(expression("net\n", dotted).as_deref(), Some("net"));
        assert_eq!(expression("build().cuda\n", dotted), None, "a call in the chain is not a name");
        assert_eq!(expression("a  +  b\n", |s, n| text(s, n).to_owned()), "a  +  b");
    }

    /// A name read from its text (written plainly) or link by link (spaced, continued,
    /// commented) is the same name; a keyword, a number or a call in the chain is none.
    #[test]
    fn a_dotted_name_is_the_same_however_it_is_written() {
        for source in ["torch.nn.Linear\n", "torch . nn .Linear\n", "torch.nn.\\\n    Linear\n", "(torch  # the library\n .nn\n .Linear)(3, 4)\n"] {
            let name = expression(source, |s, n| {
                let n = if n.kind_name() == "call" { n.field("function").and_then(|f| f.named_child(0)).expect("a callee") } else { n };
                dotted(s, n)
            });
            assert_eq!(name.as_deref(), Some("torch.nn.Linear"), "{source:?}");
        }
        assert_eq!(expression("self.enc_1.é\n", dotted).as_deref(), Some("self.enc_1.é"));
        assert_eq!(expression("None.x\n", dotted), None, "`None` names no value");
        assert_eq!(expression("x.y().z\n", dotted), None);
        assert_eq!(expression("1.5\n", dotted), None);
        assert_eq!(expression("a.b[0].c\n", dotted), None);
    }

    #[test]
    fn the_callee_an_expression_is_built_by() {
        let callee = |source: &str| expression(source, |s, n| returned_callee_of(s)(n));
        assert_eq!(callee("Net(cfg).cuda().eval()\n").as_deref(), Some("Net"), "through methods that return the module");
        assert_eq!(callee("nets.build(cfg)\n").as_deref(), Some("nets.build"));
        assert_eq!(callee("(m.to(device))\n").as_deref(), Some("m"), "a name, to look up in the assignments");
        assert_eq!(callee("net.encode(x)\n").as_deref(), Some("net.encode"), "a method that does not return the module");
        assert_eq!(callee("a + b\n"), None);
    }

    #[test]
    fn calls_and_decorators_that_disable_gradients() {
        let call = |source: &str| expression(source, disables_grad_call);
        assert!(call("torch.no_grad()\n"));
        assert!(call("torch.inference_mode()\n"));
        assert!(!call("torch.inference_mode(False)\n"));
        assert!(call("torch.set_grad_enabled(False)\n"));
        assert!(!call("torch.set_grad_enabled(True)\n"));
        assert!(!call("torch.enable_grad()\n"));
        let decorated = |source: &str| decorator(source, decorator_disables_grad);
        assert!(decorated("@torch.no_grad()\ndef f():\n    pass\n"));
        assert!(decorated("@no_grad\ndef f():\n    pass\n"));
        assert!(decorated("@torch.inference_mode()\ndef f():\n    pass\n"));
        assert!(!decorated("@torch.inference_mode(False)\ndef f():\n    pass\n"));
        assert!(!decorated("@staticmethod\ndef f():\n    pass\n"));
    }

    #[test]
    fn bodies_that_run_a_backward_pass() {
        let runs = |source: &str| {
            let parsed = crate::parse(source);
            runs_backward(source, parsed.tree.root_node())
        };
        assert!(runs("def step(loss):\n    loss.backward()\n"));
        assert!(runs("def step(y, x):\n    return torch.autograd.grad(y, x)\n"));
        assert!(runs("def outer(loss):\n    def inner():\n        loss.backward()\n"), "nested functions count, conservatively");
        assert!(!runs("def step(loss):\n    return loss.item()\n"));
    }
}

/// The folders a module puts on `sys.path` (`sys.path.append("../lib")`,
/// `sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))`,
/// `sys.path.append(str(Path(__file__).parent.parent))`), as paths relative to the
/// module's own folder (`"../lib"`, `".."`): its absolute imports may name modules there.
/// A relative literal is read from the module's folder (scripts are run from there); an
/// absolute one, or a path built from anything but literals and `__file__`, is unknown and
/// left out.
pub(crate) fn sys_path_dirs(source: &str, nodes: &NamedNodes<'_>) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    if !source.contains("sys.path") {
        return dirs;
    }
    // The walk's nodes, each node's last child first: the order the folders are listed in.
    let mut stack = vec![0];
    while let Some(at) = stack.pop() {
        if nodes.kind(at) == "call" {
            if let Some(dir) = sys_path_call_dir(source, nodes.node(at)) {
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
        stack.extend(nodes.children(at));
    }
    dirs
}

/// The folder `sys.path.append(P)` / `sys.path.insert(i, P)` adds, relative to the module's.
fn sys_path_call_dir(source: &str, call: Node<'_>) -> Option<String> {
    let callee = dotted(source, call.field("function")?)?;
    let position = match callee.as_str() {
        "sys.path.append" => 0,
        "sys.path.insert" => 1,
        _ => return None,
    };
    let argument = named_children(call.field("arguments")?).into_iter().filter(|a| a.kind_name() != "comment").nth(position)?;
    match path_value(source, argument)? {
        PathValue::Folder(parts) => Some(if parts.is_empty() { ".".to_owned() } else { parts.join("/") }),
        PathValue::ThisFile => None,
    }
}

/// A path built from literals and `__file__`, relative to the module's folder.
enum PathValue {
    /// `__file__` itself.
    ThisFile,
    /// A folder, as components from the module's folder (`..` kept when it climbs above).
    Folder(Vec<String>),
}

fn path_value(source: &str, node: Node<'_>) -> Option<PathValue> {
    let node = unparenthesize(node);
    match node.kind_name() {
        "identifier" if text(source, node) == "__file__" => Some(PathValue::ThisFile),
        "string" => {
            let literal = string_literal(source, node)?;
            let is_absolute = literal.starts_with('/') || literal.starts_with('~') || literal.starts_with('\\') || literal.contains(':');
            (!is_absolute).then(|| PathValue::Folder(join_components(Vec::new(), literal)))
        }
        "call" => {
            let function = node.field("function")?;
            // `Path(__file__).resolve()`: the same path.
            if function.kind_name() == "attribute"
                && function.field("attribute").is_some_and(|a| matches!(text(source, a), "resolve" | "absolute"))
                && node.field("arguments").is_some_and(|a| a.named_child_count() == 0)
            {
                return path_value(source, function.field("object")?);
            }
            let callee = dotted(source, function)?;
            let last = callee.rsplit('.').next().unwrap_or("");
            let arguments: Vec<Node> = node.field("arguments").map(named_children).unwrap_or_default();
            match last {
                "abspath" | "realpath" | "normpath" | "str" | "Path" | "PurePath" | "fspath" => path_value(source, *arguments.first()?),
                "dirname" => Some(parent(path_value(source, *arguments.first()?)?)),
                "getcwd" if arguments.is_empty() => Some(PathValue::Folder(Vec::new())),
                "join" if callee.ends_with("path.join") => {
                    let mut value = path_value(source, *arguments.first()?)?;
                    for argument in &arguments[1..] {
                        value = join(value, source, *argument)?;
                    }
                    Some(value)
                }
                _ => None,
            }
        }
        "attribute" if node.field("attribute").map(|a| text(source, a)) == Some("parent") => {
            Some(parent(path_value(source, node.field("object")?)?))
        }
        "binary_operator" => {
            let operator = node.field("operator").map(|o| text(source, o))?;
            let left = path_value(source, node.field("left")?)?;
            let right = node.field("right")?;
            match operator {
                // `Path(__file__).parent / "lib"`
                "/" => join(left, source, right),
                // `os.path.dirname(__file__) + "/../lib"`: text appended, its `/` a separator.
                "+" => {
                    let PathValue::Folder(parts) = left else { return None };
                    let literal = string_literal(source, right)?;
                    Some(PathValue::Folder(join_components(parts, literal.trim_start_matches(['/', '\\']))))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The text of a string literal without interpolations.
fn string_literal<'s>(source: &'s str, node: Node<'_>) -> Option<&'s str> {
    if node.kind_name() != "string" || named_children(node).iter().any(|c| c.kind_name() == "interpolation") {
        return None;
    }
    let raw = text(source, node);
    let body = raw.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let quote = if body.starts_with("\"\"\"") || body.starts_with("'''") { 3 } else { 1 };
    body.get(quote..body.len().checked_sub(quote)?)
}

fn parent(value: PathValue) -> PathValue {
    match value {
        PathValue::ThisFile => PathValue::Folder(Vec::new()),
        PathValue::Folder(parts) => PathValue::Folder(join_components(parts, "..")),
    }
}

/// `value` joined with the literal `part` (a string; anything else is unknown).
fn join(value: PathValue, source: &str, part: Node<'_>) -> Option<PathValue> {
    let PathValue::Folder(parts) = value else { return None };
    match path_value(source, part)? {
        PathValue::Folder(more) => Some(PathValue::Folder(join_components(parts, &more.join("/")))),
        PathValue::ThisFile => None,
    }
}

/// `parts` followed by the `/`-separated `path`, with `.` dropped and `..` taking back a
/// component where there is one.
fn join_components(mut parts: Vec<String>, path: &str) -> Vec<String> {
    for component in path.split(['/', '\\']) {
        match component {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| p != "..") => {
                parts.pop();
            }
            other => parts.push(other.to_owned()),
        }
    }
    parts
}

#[cfg(test)]
mod sys_path_tests {
    use super::{sys_path_dirs, NamedNodes};

    fn dirs(source: &str) -> Vec<String> {
        let tree = crate::parse(source).tree;
        sys_path_dirs(source, &NamedNodes::of(tree.root_node()))
    }

    #[test]
    fn literal_folders_relative_to_the_module() {
        assert_eq!(dirs("import sys\nsys.path.append('../semi-supervised')\n"), ["../semi-supervised"]);
        assert_eq!(dirs("import sys\nsys.path.insert(0, './lib/')\n"), ["lib"]);
        assert_eq!(dirs("import sys\nsys.path.append('..')\nsys.path.append('..')\n"), [".."], "each folder once");
    }

    #[test]
    fn folders_built_from_this_file() {
        assert_eq!(dirs("import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))\n"), ["../lib"]);
        assert_eq!(dirs("import os, sys\nsys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n"), [".."]);
        assert_eq!(dirs("import sys\nfrom pathlib import Path\nsys.path.append(str(Path(__file__).resolve().parent.parent / 'src'))\n"), ["../src"]);
        assert_eq!(dirs("import os, sys\nsys.path.append(os.path.dirname(__file__) + '/../lib')\n"), ["../lib"]);
        assert_eq!(dirs("import os, sys\ndef main():\n    sys.path.append(os.getcwd())\n"), ["."]);
    }

    #[test]
    fn absolute_or_computed_folders_are_unknown() {
        assert!(dirs("import sys\nsys.path.append('/opt/code')\n").is_empty());
        assert!(dirs("import sys\nsys.path.append(ROOT)\n").is_empty());
        assert!(dirs("import sys\nsys.path.append(f'{ROOT}/lib')\n").is_empty());
        assert!(dirs("import sys\nsys.path.append(__file__)\n").is_empty(), "a file is no folder");
        assert!(dirs("paths = []\npaths.append('../lib')\n").is_empty(), "not sys.path");
    }
}
