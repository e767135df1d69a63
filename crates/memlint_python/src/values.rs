//! Values: what an expression holds (a module, a tensor with or without autograd history,
//! a number, an optimizer...), from how it was built and where it flows.

use rustc_hash::FxHashSet as HashSet;
use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;
use crate::lexicon::*;
use crate::library::*;

pub(crate) fn combine_arithmetic(left: ValueKind, right: ValueKind) -> ValueKind {
    use ValueKind::*;
    match (left, right) {
        (GradTensor, _) | (_, GradTensor) => GradTensor,
        (PlainTensor, _) | (_, PlainTensor) => PlainTensor,
        (Number, Number) => Number,
        _ => Unknown,
    }
}

impl<'t> SemanticModel<'t> {
    /// What calling the function `def` (defined in this module) returns: the kind of its
    /// `return` values when they agree (a local factory `build_model()` returning a
    /// module; `load_networks()` returning a tuple of networks). This, with
    /// [`Self::imported_call_result`], is where the result of a call is decided.
    pub fn function_return_kind(&self, def: Node<'t>) -> ValueKind {
        if let Some(kind) = self.return_kinds.borrow().get(&def.id()) {
            return *kind;
        }
        self.return_kinds.borrow_mut().insert(def.id(), ValueKind::Unknown);
        let mut kind = ValueKind::Unknown;
        if let Some(returns) = self.returns.get(&def.id()) {
            let kinds: Vec<ValueKind> = returns
                .iter()
                .filter_map(|r| r.named_child(0))
                .map(|v| self.value_kind_at_depth(v, 8))
                .collect();
            let known: Vec<ValueKind> = kinds.iter().copied().filter(|k| *k != ValueKind::Unknown).collect();
            if let Some(first) = known.first() {
                if known.iter().all(|k| k == first) && matches!(first, ValueKind::Model | ValueKind::Loss | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number) {
                    kind = *first;
                }
            }
        }
        self.return_kinds.borrow_mut().insert(def.id(), kind);
        kind
    }

    /// What calling an imported function or class returns, by its qualified name (a
    /// project index answers here for the project's own functions).
    pub fn imported_call_result(&self, qualified: &str) -> ValueKind {
        let last = qualified.rsplit('.').next().unwrap_or(qualified);
        if qualified.starts_with("torch.optim.") && is_class_name(last) && !qualified.contains("lr_scheduler") {
            return ValueKind::Optimizer;
        }
        if last == "GradScaler" {
            return ValueKind::Scaler;
        }
        if last == "DataLoader" {
            return ValueKind::DataLoader;
        }
        if self.is_module_class(qualified) {
            return if class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model };
        }
        ValueKind::Unknown
    }

    /// What `expr` holds, taking the gradient context at `expr` into account.
    pub fn value_kind(&self, expr: Node<'t>) -> ValueKind {
        if let Some(kind) = self.value_cache.borrow().get(&expr.id()) {
            return *kind;
        }
        // Guard against cycles (`x = x + 1` is looked up through earlier bindings only,
        // but a malformed tree could still loop).
        self.value_cache.borrow_mut().insert(expr.id(), ValueKind::Unknown);
        let kind = self.compute_value_kind(expr, 0);
        self.value_cache.borrow_mut().insert(expr.id(), kind);
        kind
    }

    /// Does `expr` hold a tensor with autograd history?
    pub fn has_autograd_history(&self, expr: Node<'t>) -> bool {
        self.value_kind(expr) == ValueKind::GradTensor
    }

    pub(crate) fn grad_or_plain(&self, at: Node<'t>) -> ValueKind {
        if self.grad_context(at).is_disabled() {
            ValueKind::PlainTensor
        } else {
            ValueKind::GradTensor
        }
    }

    pub(crate) fn compute_value_kind(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        if depth > 24 {
            return ValueKind::Unknown;
        }
        match expr.kind_name() {
            "parenthesized_expression" => expr.named_child(0).map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown),
            "integer" | "float" | "true" | "false" => ValueKind::Number,
            "unary_operator" | "not_operator" => {
                expr.field("argument").map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown)
            }
            "binary_operator" => {
                let left = expr.field("left").map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown);
                let right = expr.field("right").map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown);
                combine_arithmetic(left, right)
            }
            "conditional_expression" => {
                let kinds: Vec<ValueKind> = named_children(expr).into_iter().take(1).chain(named_children(expr).into_iter().skip(2)).map(|e| self.value_kind(e)).collect();
                kinds.into_iter().fold(ValueKind::Unknown, |acc, k| if acc == ValueKind::GradTensor { acc } else if k != ValueKind::Unknown { k } else { acc })
            }
            "subscript" => match expr.field("value").map(|v| self.value_kind(v)) {
                Some(ValueKind::GradTensor) => ValueKind::GradTensor,
                Some(ValueKind::PlainTensor) => ValueKind::PlainTensor,
                Some(k @ (ValueKind::Model | ValueKind::Loss)) => k,
                _ => ValueKind::Unknown,
            },
            "identifier" => self.identifier_kind(expr, depth),
            // A container of modules (`[netG, netD]`, `{"G": G}`, `[Net() for _ in
            // range(k)]`, `return enc, dec`) is read as a module: indexing and iterating it
            // give modules. Other containers stay unknown.
            "list" | "tuple" | "expression_list" | "set" => {
                let elements = named_children(expr);
                if !elements.is_empty() && elements.iter().all(|e| self.value_kind_at_depth(*e, depth + 1) == ValueKind::Model) {
                    ValueKind::Model
                } else {
                    ValueKind::Unknown
                }
            }
            "dictionary" => {
                let values: Vec<Node> = named_children(expr).into_iter().filter_map(|p| p.field("value")).collect();
                if !values.is_empty() && values.iter().all(|e| self.value_kind_at_depth(*e, depth + 1) == ValueKind::Model) {
                    ValueKind::Model
                } else {
                    ValueKind::Unknown
                }
            }
            "list_comprehension" | "generator_expression" | "set_comprehension" => match expr.field("body") {
                Some(body) if self.value_kind_at_depth(body, depth + 1) == ValueKind::Model => ValueKind::Model,
                _ => ValueKind::Unknown,
            },
            "dictionary_comprehension" => match expr.field("body").and_then(|p| p.field("value")) {
                Some(body) if self.value_kind_at_depth(body, depth + 1) == ValueKind::Model => ValueKind::Model,
                _ => ValueKind::Unknown,
            },
            "attribute" => self.attribute_kind(expr, depth),
            "call" => self.call_kind(expr, depth),
            "await" => expr.named_child(0).map(|e| self.value_kind(e)).unwrap_or(ValueKind::Unknown),
            _ => ValueKind::Unknown,
        }
    }

    pub(crate) fn identifier_kind(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        let name = self.text(expr);
        if matches!(name, "None" | "True" | "False") {
            return ValueKind::Unknown;
        }
        let from_binding = match self.binding_at(name, expr) {
            Some(binding) => match (binding.kind, binding.value) {
                (BindingKind::Assign, Some(value)) | (BindingKind::WithTarget, Some(value)) => {
                    // A tuple target takes one element of a call's result: same kind.
                    self.value_kind_at_depth(value, depth + 1)
                }
                (BindingKind::AugAssign, Some(value)) => {
                    // `x += y`: the kind of x before, combined with y.
                    let before = self
                        .bindings_in_scope(name, expr)
                        .iter()
                        .rev()
                        .find(|b| b.position < binding.position && b.kind != BindingKind::AugAssign)
                        .and_then(|b| b.value)
                        .map(|v| self.value_kind_at_depth(v, depth + 1))
                        .unwrap_or(ValueKind::Unknown);
                    combine_arithmetic(before, self.value_kind_at_depth(value, depth + 1))
                }
                (BindingKind::Definition, _) => match binding.statement.kind_name() {
                    "class_definition" => {
                        if self.is_module_class(name) { ValueKind::ModuleClass } else { ValueKind::Callable }
                    }
                    "function_definition" => ValueKind::Callable,
                    // An import: what the imported name is (a class, a function, a module).
                    _ => match self.lookup_import(name, expr) {
                        Some(qualified) => self.imported_value(qualified),
                        None => ValueKind::Callable,
                    },
                },
                (BindingKind::LoopTarget, _) => self.loop_target_kind(name, binding, depth),
                _ => ValueKind::Unknown,
            },
            // Not bound in this module (a builtin, a star import): a CamelCase name is a class.
            None if is_class_name(name) => self.class_value(name),
            None => ValueKind::Unknown,
        };
        if from_binding != ValueKind::Unknown {
            return from_binding;
        }
        // What is done with the name: `x.eval()`, `x.parameters()` only exist on modules
        // (in the function; a lambda's parameter or a comprehension's target of the same
        // name is another value).
        let bound_locally = || self.local_scopes_of(expr).any(|id| self.bindings_of(Some(id), name).is_some());
        if self.is_module_by_use(self.scope_of(expr), name) && !bound_locally() {
            return if name_says_loss(name) { ValueKind::Loss } else { ValueKind::Model };
        }
        // Unknown value (a parameter, a call we cannot see into): fall back to what the
        // name says.
        if name_says_loss(name) {
            ValueKind::Loss
        } else if name_says_model(name) {
            ValueKind::Model
        } else {
            ValueKind::Unknown
        }
    }

    /// The value of a loop (or comprehension) target: an element of a container of modules
    /// (`for m in models`, `for name, net in nets.items()`, `for i, layer in
    /// enumerate(self.layers)`) is a module; the other parts of a tuple target are not.
    pub(crate) fn loop_target_kind(&self, name: &str, binding: &Binding<'t>, depth: usize) -> ValueKind {
        let statement = binding.statement;
        let (Some(target), Some(mut iterable)) = (statement.field("left"), statement.field("right")) else {
            return ValueKind::Unknown;
        };
        let mut unpacks = false;
        // Iterating a dict's keys, not its values (`for k in d:`).
        let mut over_values = false;
        // `enumerate(xs)`, `xs.items()`, `xs.values()`, `zip(...)` (not followed).
        loop {
            iterable = unparenthesize(iterable);
            if iterable.kind_name() != "call" {
                break;
            }
            let Some(callee) = iterable.field("function") else { break };
            match callee.kind_name() {
                "identifier" if self.text(callee) == "enumerate" => {
                    match iterable.field("arguments").and_then(|a| a.named_child(0)) {
                        Some(inner) => {
                            iterable = inner;
                            unpacks = true;
                        }
                        None => return ValueKind::Unknown,
                    }
                }
                "attribute" => {
                    let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
                    let Some(object) = callee.field("object") else { return ValueKind::Unknown };
                    match method {
                        "values" | "children" | "modules" => {
                            iterable = object;
                            over_values = true;
                        }
                        "items" | "named_children" | "named_modules" => {
                            iterable = object;
                            unpacks = true;
                            over_values = true;
                        }
                        _ => return ValueKind::Unknown,
                    }
                    break;
                }
                _ => return ValueKind::Unknown,
            }
        }
        // Only the last name of an unpacking target is the element.
        let is_element = if unpacks || matches!(target.kind_name(), "pattern_list" | "tuple_pattern" | "list_pattern") {
            let last = named_children(target).into_iter().last();
            last.map(|l| l.kind_name() == "identifier" && self.text(l) == name).unwrap_or(false)
        } else {
            target.kind_name() == "identifier"
        };
        if !is_element {
            return ValueKind::Unknown;
        }
        if self.value_kind_at_depth(iterable, depth + 1) == ValueKind::Model {
            return ValueKind::Model;
        }
        // A dict, list or tuple built here of tensors with history (`terms = {"ce": ce,
        // "l2": l2}`, then `for name, term in terms.items():`).
        if self.literal_elements_have_history(iterable, over_values, binding.statement, depth) {
            return ValueKind::GradTensor;
        }
        ValueKind::Unknown
    }

    /// Is `iterable` a name bound once in its scope, before `at`, to a dict (iterated over
    /// its values), list or tuple display whose every element carries autograd history?
    pub(crate) fn literal_elements_have_history(&self, iterable: Node<'t>, over_values: bool, at: Node<'t>, depth: usize) -> bool {
        if iterable.kind_name() != "identifier" || depth > 8 {
            return false;
        }
        let name = self.text(iterable);
        let [binding] = self.bindings_in_scope(name, iterable) else { return false };
        let (BindingKind::Assign, Some(value)) = (binding.kind, binding.value) else { return false };
        if binding.position > at.start_byte() {
            return false;
        }
        let value = unparenthesize(value);
        let elements: Vec<Node<'t>> = match (value.kind_name(), over_values) {
            ("dictionary", true) => named_children(value).into_iter().map(|p| if p.kind_name() == "pair" { p.field("value") } else { None }).collect::<Option<Vec<_>>>().unwrap_or_default(),
            ("list" | "tuple", false) => named_children(value),
            _ => return false,
        };
        !elements.is_empty() && elements.iter().all(|e| self.value_kind_at_depth(*e, depth + 1) == ValueKind::GradTensor)
    }

    /// The value of a class by its name alone (imported from a module memlint does not
    /// read, or bound by a star import): a module class when its name says network or
    /// loss, else a class of something else. Calling either is not a forward pass.
    pub(crate) fn class_value(&self, name: &str) -> ValueKind {
        if self.is_module_class(name) { ValueKind::ModuleClass } else { ValueKind::Callable }
    }

    /// What an imported name is, by its fully qualified name: `torch.nn.Linear` and
    /// `torchvision.models.resnet50` build modules, a CamelCase name is a class, anything
    /// else a function or a Python module. Never a module instance.
    pub fn imported_value(&self, qualified: &str) -> ValueKind {
        let last = qualified.rsplit('.').next().unwrap_or(qualified);
        if module_factory(qualified) {
            return ValueKind::ModuleClass;
        }
        if is_class_name(last) {
            return self.class_value(qualified);
        }
        ValueKind::Callable
    }

    /// Is a module-only method called on `name` in `scope` (`name.eval()`,
    /// `name.parameters()`, `name.load_state_dict(...)`)?
    pub(crate) fn is_module_by_use(&self, scope: ScopeId, name: &str) -> bool {
        let set = self.modules_by_use.get_or_init(|| {
            let mut set = HashSet::default();
            for method in MODULE_ONLY_METHODS {
                for call in self.calls_named(method) {
                    let Some(object) = call.field("function").and_then(|f| f.field("object")) else { continue };
                    let object = unparenthesize(object);
                    match object.kind_name() {
                        "identifier" => {
                            set.insert((self.scope_of(*call), self.text(object)));
                        }
                        "attribute" if object.field("object").map(|o| self.text(o) == "self").unwrap_or(false) => {
                            set.insert((None, self.text(object)));
                        }
                        _ => {}
                    }
                }
            }
            set
        });
        set.contains(&(scope, name))
    }

    pub(crate) fn value_kind_at_depth(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        if let Some(kind) = self.value_cache.borrow().get(&expr.id()) {
            return *kind;
        }
        self.value_cache.borrow_mut().insert(expr.id(), ValueKind::Unknown);
        let kind = self.compute_value_kind(expr, depth);
        self.value_cache.borrow_mut().insert(expr.id(), kind);
        kind
    }

    pub(crate) fn attribute_kind(&self, expr: Node<'t>, depth: usize) -> ValueKind {
        let (Some(object), Some(attr)) = (expr.field("object"), expr.field("attribute")) else {
            return ValueKind::Unknown;
        };
        let attr = self.text(attr);
        if self.text(object) == "self" {
            // `self.restore_model`: a method of the class, not a network.
            if let Some(class) = self.enclosing_function(expr).and_then(|f| f.class.as_deref()) {
                if self.method_of(class, attr).is_some() {
                    return ValueKind::Callable;
                }
            }
            // `self.model`: what the class assigned (in `__init__` or another method).
            let mut known = ValueKind::Unknown;
            if let Some(values) = self.self_attributes.get(attr) {
                for v in values {
                    let k = self.value_kind_at_depth(*v, depth + 1);
                    if k.is_module() {
                        return k;
                    }
                    if known == ValueKind::Unknown
                        && matches!(k, ValueKind::ModuleClass | ValueKind::Callable | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number)
                    {
                        known = k;
                    }
                }
            }
            if known != ValueKind::Unknown {
                return known;
            }
            if self.is_module_by_use(None, self.text(expr)) {
                return if name_says_loss(attr) { ValueKind::Loss } else { ValueKind::Model };
            }
            // Else what the name says.
            return if name_says_loss(attr) {
                ValueKind::Loss
            } else if name_says_model(attr) {
                ValueKind::Model
            } else {
                ValueKind::Unknown
            };
        }
        // `super().configure_model()`: `super()` reaches the parent class's methods, never
        // a submodule (those are attributes of `self`).
        if object.kind_name() == "call" && object.field("function").is_some_and(|f| self.text(f) == "super") {
            return ValueKind::Callable;
        }
        match attr {
            "data" | "grad" => return ValueKind::PlainTensor,
            "shape" | "dtype" | "device" | "requires_grad" | "ndim" | "is_cuda" => return ValueKind::Unknown,
            _ => {}
        }
        if let Some(qualified) = self.qualified_name(expr) {
            // `networks.ResnetEncoder`, `commons.clip_grad_value_`, `nn.Linear`: a name in
            // an imported module is a class or a function, never a module instance.
            return self.imported_value(&qualified);
        }
        match self.value_kind_at_depth(object, depth + 1) {
            // `outputs.loss`, `out.logits`: fields of a model's output keep its history.
            ValueKind::GradTensor => ValueKind::GradTensor,
            ValueKind::PlainTensor => ValueKind::PlainTensor,
            // `model_file.Net` (a module object from `importlib`), `zoo.ResBlock`: a class.
            k if !k.is_module() && is_class_name(attr) => self.class_value(attr),
            // `q1.train_net`: a method of a local module class, not a submodule.
            k if k.is_module() && self.methods_by_name.contains_key(attr) => ValueKind::Callable,
            // `self.probe.adapter_model`: on an object of unknown value, a name that a class
            // of this module defines as a method is that method.
            ValueKind::Unknown if self.methods_by_name.contains_key(attr) => ValueKind::Callable,
            // `get_accelerator().default_generator`: an attribute of what an unknown call
            // returns; its name is no evidence of a network.
            ValueKind::Unknown if unparenthesize(object).kind_name() == "call" => ValueKind::Unknown,
            _ => {
                if name_says_loss(attr) {
                    ValueKind::Loss
                } else if name_says_model(attr) {
                    ValueKind::Model
                } else {
                    ValueKind::Unknown
                }
            }
        }
    }

    /// Is some argument of `call` (by position, keyword or splat; also an element of a
    /// literal list or tuple) a tensor with history?
    pub fn gives_history(&self, call: Node<'t>) -> bool {
        self.any_argument_has_history(call, 0)
    }

    pub(crate) fn any_argument_has_history(&self, call: Node<'t>, depth: usize) -> bool {
        let Some(args) = call.field("arguments") else { return false };
        named_children(args).into_iter().any(|a| {
            let value = match a.kind_name() {
                "keyword_argument" => a.field("value"),
                "list_splat" | "dictionary_splat" => a.named_child(0),
                _ => Some(a),
            };
            value.map(|v| self.holds_history(v, depth + 1)).unwrap_or(false)
        })
    }

    /// Does `expr` hold a tensor with history, itself or as an element of a literal list
    /// or tuple (`torch.cat([x, out])`, `torch.stack((a, b))`)?
    pub(crate) fn holds_history(&self, expr: Node<'t>, depth: usize) -> bool {
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "list" | "tuple" => named_children(expr).into_iter().any(|e| {
                let e = if e.kind_name() == "list_splat" { e.named_child(0).unwrap_or(e) } else { e };
                self.holds_history(e, depth + 1)
            }),
            _ => self.value_kind_at_depth(expr, depth) == ValueKind::GradTensor,
        }
    }

    pub(crate) fn call_kind(&self, call: Node<'t>, depth: usize) -> ValueKind {
        let Some(callee) = call.field("function") else { return ValueKind::Unknown };
        if callee.kind_name() == "attribute" {
            let object = callee.field("object");
            let method = callee.field("attribute").map(|a| self.text(a)).unwrap_or("");
            if let Some(qualified) = self.qualified_name(callee) {
                if let Some(kind) = self.project_call_kind(call, method) {
                    return kind;
                }
                return self.library_call_kind(call, &qualified, depth);
            }
            let Some(object) = object else { return ValueKind::Unknown };
            // `self.load_networks()`: what the method returns.
            if self.text(object) == "self" {
                if let Some(class) = self.enclosing_function(call).and_then(|f| f.class.as_deref()) {
                    if let Some(def) = self.method_of(class, method) {
                        return self.function_return_kind(def);
                    }
                }
            }
            // `policy.pi(x)` on an instance of a local module class: a method that runs the
            // forward pass gives its output, another one what it returns.
            if let Some(class) = self.instance_class_at(object, depth + 1) {
                if let Some(def) = self.method_of(class, method) {
                    if method != "forward" {
                        return if self.method_runs_forward(def) { self.grad_or_plain(call) } else { self.function_return_kind(def) };
                    }
                }
            }
            match method {
                "item" | "tolist" | "__float__" | "numel" | "dim" | "size" | "nelement" | "element_size" => return ValueKind::Number,
                "numpy" | "detach" | "argmax" | "argmin" | "long" | "int" | "bool" | "eq" | "ne" | "lt" | "gt" | "le" | "ge" | "sign" | "round" => {
                    let k = self.value_kind_at_depth(object, depth + 1);
                    return if matches!(k, ValueKind::GradTensor | ValueKind::PlainTensor) || method == "detach" { ValueKind::PlainTensor } else { ValueKind::Unknown };
                }
                "forward" => {
                    let k = self.value_kind_at_depth(object, depth + 1);
                    return if k == ValueKind::Model || self.text(object) == "self" { self.grad_or_plain(call) } else { ValueKind::Unknown };
                }
                "backward" | "step" | "zero_grad" | "append" | "extend" | "update" | "eval" | "train" => return ValueKind::Unknown,
                _ => {}
            }
            // Methods that return the same kind of thing: `model.to(dev)`, `loss.mean()`.
            return match self.value_kind_at_depth(object, depth + 1) {
                ValueKind::GradTensor => ValueKind::GradTensor,
                ValueKind::PlainTensor => {
                    if matches!(method, "requires_grad_") { ValueKind::GradTensor } else { ValueKind::PlainTensor }
                }
                k @ (ValueKind::Model | ValueKind::Loss) => {
                    if MODULE_METHODS_RETURNING_SELF.contains(&method) {
                        k
                    } else if self.value_kind_at_depth(callee, depth + 1) == ValueKind::Model {
                        // `self.backbone.layer4(x)`: a submodule by name.
                        self.grad_or_plain(call)
                    } else {
                        ValueKind::Unknown
                    }
                }
                ValueKind::Unknown => {
                    let callee_kind = self.value_kind_at_depth(callee, depth + 1);
                    self.module_call_result(call, callee_kind, depth)
                }
                _ => ValueKind::Unknown,
            };
        }
        if callee.kind_name() == "identifier" {
            let name = self.text(callee);
            if let Some(kind) = self.project_call_kind(call, name) {
                return kind;
            }
            if let Some(qualified) = self.qualified_name(callee) {
                return self.library_call_kind(call, &qualified, depth);
            }
            match name {
                "float" | "int" | "len" | "bool" | "round" => return ValueKind::Number,
                "sum" | "max" | "min" | "abs" => {
                    return if self.any_argument_has_history(call, depth) { ValueKind::GradTensor } else { ValueKind::Unknown };
                }
                "self" => {
                    let is_module = self
                        .enclosing_function(call)
                        .and_then(|f| f.class.clone())
                        .map(|c| self.is_module_class(&c))
                        .unwrap_or(false);
                    return if is_module { self.grad_or_plain(call) } else { ValueKind::Unknown };
                }
                _ => {}
            }
            if self.classes.contains_key(name) {
                return if self.is_module_class(name) {
                    if class_name_says_loss(name) { ValueKind::Loss } else { ValueKind::Model }
                } else {
                    ValueKind::Unknown
                };
            }
            // A local function: what it returns (`build_model()` returning a network).
            if let Some(binding) = self.binding_at(name, callee) {
                if binding.kind == BindingKind::Definition && binding.statement.kind_name() == "function_definition" {
                    return self.function_return_kind(binding.statement);
                }
            }
            let callee_kind = self.value_kind_at_depth(callee, depth + 1);
            return self.module_call_result(call, callee_kind, depth);
        }
        ValueKind::Unknown
    }

    pub(crate) fn module_call_result(&self, call: Node<'t>, callee_kind: ValueKind, depth: usize) -> ValueKind {
        match callee_kind {
            // Constructing a module (`PSPNet(...)` from a star import, `zoo.ResBlock(...)`).
            ValueKind::ModuleClass => {
                let name = call.field("function").map(|c| self.text(c)).unwrap_or("");
                let last = name.rsplit('.').next().unwrap_or(name);
                if class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model }
            }
            ValueKind::Model => self.grad_or_plain(call),
            ValueKind::Loss => {
                if self.any_argument_has_history(call, depth) {
                    ValueKind::GradTensor
                } else {
                    ValueKind::Unknown
                }
            }
            _ => ValueKind::Unknown,
        }
    }

    pub(crate) fn library_call_kind(&self, call: Node<'t>, qualified: &str, depth: usize) -> ValueKind {
        let last = qualified.rsplit('.').next().unwrap_or("");
        if !qualified.starts_with("torch.") || qualified.starts_with("torch.optim.") || qualified.starts_with("torch.hub.") || matches!(last, "GradScaler" | "DataLoader") {
            let kind = self.imported_call_result(qualified);
            if kind != ValueKind::Unknown || !qualified.starts_with("torch.") {
                return kind;
            }
        }
        let first_upper = last.chars().next().map(char::is_uppercase).unwrap_or(false);
        if qualified.starts_with("torch.nn.") && !qualified.starts_with("torch.nn.functional.") && !qualified.starts_with("torch.nn.utils") && !qualified.starts_with("torch.nn.init") && first_upper {
            if class_name_says_loss(last) {
                return ValueKind::Loss;
            }
            if matches!(last, "Parameter" | "ParameterList" | "ParameterDict") {
                return ValueKind::Unknown;
            }
            return ValueKind::Model;
        }
        if (qualified.starts_with("torchvision.models.") || qualified.starts_with("timm.create_model") || qualified.starts_with("transformers.")) && (qualified.contains("from_pretrained") || qualified.starts_with("torchvision.models.") || qualified.starts_with("timm.")) {
            return ValueKind::Model;
        }
        if qualified.starts_with("torch.") {
            if matches!(last, "no_grad" | "inference_mode" | "enable_grad" | "set_grad_enabled" | "device" | "load" | "save" | "manual_seed") {
                return ValueKind::Unknown;
            }
            if matches!(last, "argmax" | "argmin" | "eq" | "ne" | "numel" | "randint" | "zeros" | "ones" | "empty" | "tensor" | "as_tensor" | "from_numpy" | "arange" | "randn" | "rand" | "full" | "zeros_like" | "ones_like" | "empty_like") {
                return ValueKind::PlainTensor;
            }
            return if self.any_argument_has_history(call, depth) { self.grad_or_plain(call) } else { ValueKind::Unknown };
        }
        ValueKind::Unknown
    }
}
