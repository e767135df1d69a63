//! Values of attributes and calls: `self.X` and class attributes, library calls through
//! the declarative table (`library.rs`), local and project functions (what they return),
//! methods of tensors, modules and instances of local classes, forward passes.

use tree_sitter::Node;

use super::*;
use crate::library::{self, Call};
use crate::NodeExt;

impl<'t> SemanticModel<'t> {
    pub(super) fn attribute_value(&self, expr: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        let (Some(object), Some(attr)) = (self.field(expr, "object"), self.field(expr, "attribute")) else {
            return Value::unknown();
        };
        let attr = self.text(attr);
        if self.text(object) == "self" {
            let class = self.enclosing_function(expr).and_then(|f| f.class.as_deref());
            // `self.restore_model`: a method of the class, not a network.
            if let Some(def) = class.and_then(|c| self.method_of(c, attr)) {
                return Value::new(ValueKind::Callable, Basis::Definition(def));
            }
            // `self.model`: what the class assigned (in `__init__` or another method).
            let mut known = Value::unknown();
            for v in self.self_attribute_values(expr, attr) {
                let value = self.value_at_depth(v, d);
                if value.kind.is_module() {
                    return value.via(Basis::From(v));
                }
                if known.kind == ValueKind::Unknown
                    && matches!(
                        value.kind,
                        ValueKind::ModuleClass | ValueKind::Callable | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number | ValueKind::Foreign
                    )
                {
                    known = value.via(Basis::From(v));
                }
            }
            if known.kind != ValueKind::Unknown {
                return known;
            }
            if let Some(use_) = self.module_use(None, self.text(expr)) {
                return Value::new(ValueKind::Model, Basis::Used(use_));
            }
            if let Some(use_) = self.optimizer_use(None, self.text(expr)) {
                return Value::new(ValueKind::Optimizer, Basis::Used(use_));
            }
            return Value::unknown();
        }
        // `super().configure_model()`: `super()` reaches the parent class's methods, never
        // a submodule (those are attributes of `self`).
        if object.kind_name() == "call" && self.field(object, "function").is_some_and(|f| self.text(f) == "super") {
            return Value::new(ValueKind::Callable, Basis::None);
        }
        match attr {
            "data" | "grad" => return Value::new(ValueKind::PlainTensor, Basis::From(object)),
            "shape" | "dtype" | "device" | "requires_grad" | "ndim" | "is_cuda" => return Value::unknown(),
            _ => {}
        }
        if let Some(qualified) = self.qualified_name(expr) {
            // `networks.ResnetEncoder`, `nn.Linear`, `torch.cuda.amp.autocast`: a name in an
            // imported module is a class or a function, never a module instance.
            return Value::new(self.imported_value(&qualified), Basis::Definition(expr));
        }
        let of = self.value_at_depth(object, d);
        match of.kind {
            // `outputs.loss`, `out.logits`: fields of a model's output keep its history.
            ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Foreign => of.via(Basis::From(object)),
            ValueKind::Model | ValueKind::Loss => {
                // `model.module`: the network a `DataParallel` / DDP wrapper holds.
                if attr == "module" {
                    return Value::new(ValueKind::Model, Basis::From(object));
                }
                if self.methods_by_name.contains_key(attr) {
                    return Value::new(ValueKind::Callable, Basis::None);
                }
                // A submodule the instance's class assigns (`self.encoder = Encoder()`).
                if let Some(class) = self.instance_class(object) {
                    if self.method_of(class, attr).is_some() {
                        return Value::new(ValueKind::Callable, Basis::None);
                    }
                    if let Some(v) = self.class_attribute_value(class, attr, d) {
                        return v;
                    }
                    return Value::unknown();
                }
                // ... or a class of the project does.
                if let Some(construction) = self.constructor_through_methods(object, 0) {
                    if let Some(crate::Symbol::Class { submodules, methods, .. }) = self.project_class_built_by(construction) {
                        if methods.iter().any(|m| m.name == attr) {
                            return Value::new(ValueKind::Callable, Basis::None);
                        }
                        if submodules.iter().any(|s| s == attr) {
                            return Value::new(ValueKind::Model, Basis::Project(construction));
                        }
                    }
                }
                Value::unknown()
            }
            // `q1.train_net`, `self.probe.adapter_model`: on an object of unknown value, a
            // name that a class of this module defines as a method is that method.
            ValueKind::Unknown if self.methods_by_name.contains_key(attr) => Value::new(ValueKind::Callable, Basis::None),
            _ => Value::unknown(),
        }
    }

    /// The values assigned to `self.<attr>` that `self.<attr>` at `at` can mean: those
    /// assigned in the methods of the class whose method `at` is in, of the local classes it
    /// derives from and of those that derive from it. Another class's attribute of the same
    /// name is another attribute, and so is one of an earlier class of the same name (a
    /// script's copies). When none of these classes assigns it, or `at` is in no method,
    /// the values every class of the module assigns (a mixin's method uses what the class
    /// it is mixed into sets).
    pub(crate) fn self_attribute_values(&self, at: Node<'t>, attr: &str) -> impl Iterator<Item = Node<'t>> + use<'t> {
        let Some((&attr, values)) = self.self_attributes.get_key_value(attr) else {
            return Vec::new().into_iter();
        };
        let class = self.enclosing_function(at).and_then(|f| self.method_class(f));
        let key = (class.map_or(0, |c| c.id()), attr);
        if let Some(known) = self.self_attribute_values.borrow().get(&key) {
            return known.clone().into_iter();
        }
        let related = |v: &Node<'t>| {
            let setter = self.enclosing_function(*v).and_then(|f| self.method_class(f));
            class.zip(setter).is_some_and(|(class, setter)| self.same_hierarchy(class, setter))
        };
        let seen: Vec<Node<'t>> = if class.is_some() && values.iter().any(related) {
            values.iter().copied().filter(related).collect()
        } else {
            values.clone()
        };
        self.self_attribute_values.borrow_mut().insert(key, seen.clone());
        seen.into_iter()
    }

    /// The `class_definition` a method is defined in (`None` for a function that is no
    /// method, a nested function among them).
    pub(crate) fn method_class(&self, function: &FunctionInfo<'t>) -> Option<Node<'t>> {
        function.class.as_ref()?;
        let class = self.parent(self.parent(function.outer)?)?;
        (class.kind_name() == "class_definition").then_some(class)
    }

    /// Are the classes defined at `a` and `b` one class or does one derive from the other
    /// (through local bases, by name)? Two definitions of one name are two classes.
    pub(crate) fn same_hierarchy(&self, a: Node<'t>, b: Node<'t>) -> bool {
        if a.id() == b.id() {
            return true;
        }
        let name = |c: Node<'t>| self.field(c, "name").map(|n| self.text(n)).unwrap_or_default();
        let (a, b) = (name(a), name(b));
        a != b && (self.class_derives_locally(a, b) || self.class_derives_locally(b, a))
    }

    /// What the local class `class` (or a local base) assigns to `self.<attr>`: a network
    /// when one of the assigned values is. (`self_attributes` is keyed by attribute name
    /// across classes; the assignment must be in a method of that class.)
    pub(super) fn class_attribute_value(&self, class: &str, attr: &str, depth: usize) -> Option<Value<'t>> {
        let values = self.self_attributes.get(attr)?;
        values.iter().find_map(|v| {
            let owner = self.enclosing_function(*v).and_then(|f| f.class.clone())?;
            if owner != class && !self.class_derives_locally(class, &owner) {
                return None;
            }
            let value = self.value_at_depth(*v, depth);
            value.kind.is_module().then(|| value.via(Basis::From(*v)))
        })
    }

    /// Does the local class `class` derive (through local bases) from the local `base`?
    pub(super) fn class_derives_locally(&self, class: &str, base: &str) -> bool {
        crate::classes::derives_by_name(class, base, |c| self.classes.get(c).map(|info| info.bases.iter().map(String::as_str).collect()).unwrap_or_default())
    }

    /// Is some argument of `call` (by position, keyword or splat; also an element of a
    /// literal list or tuple) a tensor with history?
    pub fn gives_history(&self, call: Node<'t>) -> bool {
        self.argument_with_history(call, 0).is_some()
    }

    /// Does every argument of `call` that carries history carry it from a forward pass of
    /// the same function (`head = self.head(x); lsm(head)`), through names, operands and
    /// containers? Then the graph `call` records extends that forward pass's.
    pub fn history_from_a_forward_here(&self, call: Node<'t>) -> bool {
        let Some(args) = self.field(call, "arguments") else { return false };
        let function = self.enclosing_function(call).map(|f| f.node.id());
        let mut with_history = self.named_children(args)
            .into_iter()
            .filter_map(|a| match a.kind_name() {
                "keyword_argument" => self.field(a, "value"),
                "list_splat" | "dictionary_splat" => a.named_child(0),
                _ => Some(a),
            })
            .filter_map(|v| self.holds_history(v, 1))
            .peekable();
        if with_history.peek().is_none() {
            return false;
        }
        with_history.all(|mut expr| {
            for _ in 0..16 {
                match self.value(expr).basis {
                    Basis::Forward(forward) => return self.enclosing_function(forward).map(|f| f.node.id()) == function && forward.id() != call.id(),
                    Basis::From(next) | Basis::Operand(next) | Basis::Element(next) => expr = next,
                    _ => return false,
                }
            }
            false
        })
    }

    pub(super) fn argument_with_history(&self, call: Node<'t>, depth: usize) -> Option<Node<'t>> {
        let args = self.field(call, "arguments")?;
        self.named_children(args).into_iter().find_map(|a| {
            let value = match a.kind_name() {
                "keyword_argument" => self.field(a, "value"),
                "list_splat" | "dictionary_splat" => a.named_child(0),
                _ => Some(a),
            };
            value.and_then(|v| self.holds_history(v, depth + 1))
        })
    }

    pub(super) fn any_tensor_argument(&self, call: Node<'t>, depth: usize) -> bool {
        let Some(args) = self.field(call, "arguments") else { return false };
        self.named_children(args).into_iter().any(|a| {
            let value = if a.kind_name() == "keyword_argument" { self.field(a, "value") } else { Some(a) };
            value.is_some_and(|v| self.value_at_depth(v, depth + 1).is_tensor())
        })
    }

    /// The expression holding a tensor with history in `expr`, itself or an element of a
    /// literal list or tuple (`torch.cat([x, out])`, `torch.stack((a, b))`).
    pub(super) fn holds_history(&self, expr: Node<'t>, depth: usize) -> Option<Node<'t>> {
        let expr = unparenthesize(expr);
        match expr.kind_name() {
            "list" | "tuple" => self.named_children(expr).into_iter().find_map(|e| {
                let e = if e.kind_name() == "list_splat" { e.named_child(0).unwrap_or(e) } else { e };
                self.holds_history(e, depth + 1)
            }),
            _ => (self.value_kind_at_depth(expr, depth) == ValueKind::GradTensor).then_some(expr),
        }
    }

    /// A tensor operation's result: history when an argument has it (and gradients are on
    /// here), a tensor without when an argument is a tensor, else unknown.
    pub(super) fn tensor_op_result(&self, call: Node<'t>, depth: usize) -> Value<'t> {
        if let Some(arg) = self.argument_with_history(call, depth) {
            let kind = self.grad_or_plain(call);
            return Value::new(kind, if kind == ValueKind::GradTensor { Basis::Operand(arg) } else { Basis::Library(call) });
        }
        if self.any_tensor_argument(call, depth) {
            return Value::new(ValueKind::PlainTensor, Basis::Library(call));
        }
        Value::unknown()
    }

    /// What the library call `call` of `qualified` returns, by the library's model.
    pub(super) fn library_value(&self, call: Node<'t>, qualified: &str, depth: usize) -> Value<'t> {
        let Some(model) = library::call_model(qualified) else { return Value::unknown() };
        let basis = Basis::Library(call);
        match model {
            Call::BuildsNetwork => Value::new(ValueKind::Model, Basis::Built(call)),
            Call::BuildsLoss => Value::new(ValueKind::Loss, Basis::Built(call)),
            Call::BuildsOptimizer => Value::new(ValueKind::Optimizer, Basis::Built(call)),
            Call::BuildsScaler => Value::new(ValueKind::Scaler, Basis::Built(call)),
            Call::BuildsLoader => Value::new(ValueKind::DataLoader, Basis::Built(call)),
            Call::ReturnsFirstArgument => {
                let first = self.field(call, "arguments").and_then(|a| self.named_children(a).into_iter().find(|x| x.kind_name() != "comment"));
                let first = first.map(|f| if f.kind_name() == "keyword_argument" { self.field(f, "value").unwrap_or(f) } else { f });
                first.map(|f| self.value_at_depth(f, depth + 1).via(Basis::From(f))).unwrap_or(Value::unknown())
            }
            // `torch.rand(n, requires_grad=True)`: a leaf that records a graph of every
            // operation on it.
            Call::NewTensor if self.keyword_value(call, "requires_grad").is_some_and(|v| self.text(v) == "True") => {
                Value::new(ValueKind::GradTensor, basis)
            }
            Call::NewTensor | Call::TensorNoHistory => Value::new(ValueKind::PlainTensor, basis),
            Call::TensorOp => self.tensor_op_result(call, depth),
            Call::Number => Value::new(ValueKind::Number, basis),
            Call::Foreign => Value::new(ValueKind::Foreign, basis),
            Call::ReturnsArguments | Call::Backward | Call::DisablesGrad | Call::EnablesGrad | Call::SetsGrad | Call::ReadsOnly | Call::Other => {
                Value::unknown()
            }
        }
    }

    /// What calling the function `def` (defined in this module) returns: the value of its
    /// `return` values when they agree (a local factory `build_model()` returning a module;
    /// `train_step()` returning its loss, with history). `None` returns are no value.
    pub fn function_return_value(&self, def: Node<'t>, depth: usize) -> Value<'t> {
        if let Some(value) = self.return_values.borrow().get(&def.id()) {
            return *value;
        }
        self.return_values.borrow_mut().insert(def.id(), Value::unknown());
        let mut result: Option<Value<'t>> = None;
        if let Some(returns) = self.returns.get(&def.id()) {
            for value in returns.iter().filter_map(|r| r.named_child(0)).filter(|v| v.kind_name() != "none") {
                let v = Value::new(self.value_kind_at_depth(value, depth + 1), Basis::Returned(value));
                result = Some(match result {
                    None => v,
                    Some(seen) => join(seen, v, false),
                });
            }
        }
        let result = result.filter(|v| {
            matches!(
                v.kind,
                ValueKind::Model | ValueKind::Loss | ValueKind::Optimizer | ValueKind::Scaler | ValueKind::DataLoader | ValueKind::Number | ValueKind::GradTensor | ValueKind::PlainTensor | ValueKind::Foreign
            )
        });
        let result = result.unwrap_or(Value::unknown());
        self.return_values.borrow_mut().insert(def.id(), result);
        result
    }

    /// [`Self::function_return_value`]'s kind.
    pub fn function_return_kind(&self, def: Node<'t>) -> ValueKind {
        self.function_return_value(def, 0).kind
    }

    /// What calling an imported function or class returns, by its qualified name (a
    /// project index answers for the project's own functions).
    pub fn imported_call_result(&self, qualified: &str) -> ValueKind {
        match library::call_model(qualified) {
            Some(Call::BuildsOptimizer) => return ValueKind::Optimizer,
            Some(Call::BuildsScaler) => return ValueKind::Scaler,
            Some(Call::BuildsLoader) => return ValueKind::DataLoader,
            Some(Call::BuildsLoss) => return ValueKind::Loss,
            Some(Call::BuildsNetwork) => return ValueKind::Model,
            _ => {}
        }
        if self.is_module_class(qualified) {
            let last = qualified.rsplit('.').next().unwrap_or(qualified);
            return if crate::lexicon::class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model };
        }
        ValueKind::Unknown
    }

    /// A module instance built by calling the class `class` (a module class): a loss module
    /// when its class's name says so, else a network. (The value is known to be a module by
    /// its class; the name only tells a loss from a network.)
    pub(super) fn instance_of_module_class(&self, class: &str, call: Node<'t>) -> Value<'t> {
        let last = class.rsplit('.').next().unwrap_or(class);
        let kind = if crate::lexicon::class_name_says_loss(last) { ValueKind::Loss } else { ValueKind::Model };
        Value::new(kind, Basis::Built(call))
    }

    pub(super) fn call_value(&self, call: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        let Some(callee) = self.field(call, "function") else { return Value::unknown() };
        // A forward pass (of a network, or a method of a module class that runs one): its
        // output.
        if let Some(module) = self.forward_callee(call) {
            // No graph: gradients are off in the forward, or the network has no parameter
            // that trains (frozen, or none at all) and no input carries history.
            let records_nothing = self.forward_runs_without_grad(call)
                || ((self.is_frozen_network(module) || self.holds_no_parameters(module).is_some()) && self.argument_with_history(call, d).is_none());
            return if records_nothing { Value::new(ValueKind::PlainTensor, Basis::Forward(call)) } else { self.forward_output(call) };
        }
        match callee.kind_name() {
            "attribute" => self.method_call_value(call, callee, depth),
            "identifier" => {
                let name = self.text(callee);
                if let Some(value) = self.project_call_value(call, name) {
                    return value;
                }
                if let Some(qualified) = self.qualified_name(callee) {
                    return self.library_value(call, &qualified, depth);
                }
                match name {
                    "float" | "int" | "len" | "bool" | "round" => return Value::new(ValueKind::Number, Basis::Library(call)),
                    "sum" | "max" | "min" | "abs" => {
                        return match self.argument_with_history(call, depth) {
                            Some(arg) => Value::new(ValueKind::GradTensor, Basis::Operand(arg)),
                            None => Value::unknown(),
                        };
                    }
                    // An iterator over (or a copy of) a container of networks, optimizers or
                    // batches holds the same elements; `next()` of one gives an element.
                    "iter" | "reversed" | "list" | "tuple" | "sorted" | "next" => {
                        let Some(argument) = self.field(call, "arguments").and_then(|a| a.named_child(0)) else { return Value::unknown() };
                        let of = self.value_at_depth(argument, d);
                        return match (name, of.kind) {
                            ("next", ValueKind::DataLoader) => Value::new(ValueKind::PlainTensor, Basis::Element(argument)),
                            ("next", kind) if kind.is_module() || kind == ValueKind::Optimizer => Value::new(kind, Basis::Element(argument)),
                            (_, kind) if kind.is_module() || matches!(kind, ValueKind::Optimizer | ValueKind::DataLoader) => of.via(Basis::From(argument)),
                            _ => Value::unknown(),
                        };
                    }
                    "self" => {
                        let is_module = self.enclosing_function(call).and_then(|f| f.class.clone()).is_some_and(|c| self.is_module_class(&c));
                        return if is_module { self.forward_output(call) } else { Value::unknown() };
                    }
                    _ => {}
                }
                if self.classes.contains_key(name) {
                    return if self.is_module_class(name) { self.instance_of_module_class(name, call) } else { Value::unknown() };
                }
                // `cls(...)` in a classmethod: an instance of its class.
                if let Some(class) = self.classmethod_class(callee) {
                    return if self.is_module_class(&class) { self.instance_of_module_class(&class, call) } else { Value::unknown() };
                }
                // A local function: what it returns (`build_model()` returning a network; the
                // argument itself when it gives a parameter back: `cuda(net, flag)`).
                if let Some(binding) = self.binding_at(name, callee) {
                    if binding.kind == BindingKind::Definition && binding.statement.kind_name() == "function_definition" {
                        if let Some(argument) = self.argument_returned(binding.statement, call) {
                            return self.value_at_depth(argument, d).via(Basis::From(argument));
                        }
                        return self.function_return_value(binding.statement, d);
                    }
                }
                let of = self.value_at_depth(callee, d);
                self.result_of_calling(call, of, depth)
            }
            _ => {
                let of = self.value_at_depth(callee, d);
                self.result_of_calling(call, of, depth)
            }
        }
    }

    /// The class whose classmethod binds `name` as its first parameter (`cls`).
    fn classmethod_class(&self, name: Node<'t>) -> Option<String> {
        let binding = self.binding_at(self.text(name), name).filter(|b| b.kind == BindingKind::Parameter)?;
        let (info, _, position) = self.parameter_site(binding)?;
        (position == 0 && self.is_classmethod(info)).then(|| info.class.clone()).flatten()
    }

    /// Calling a value: constructing a module (a module class), a forward pass (a
    /// network), a loss (a loss module given a tensor with history).
    pub(super) fn result_of_calling(&self, call: Node<'t>, callee: Value<'t>, depth: usize) -> Value<'t> {
        match callee.kind {
            ValueKind::ModuleClass => {
                let name = self.field(call, "function").map(|c| self.text(c)).unwrap_or("");
                self.instance_of_module_class(name, call)
            }
            ValueKind::Model => {
                if self.forward_runs_without_grad(call) {
                    Value::new(ValueKind::PlainTensor, Basis::Forward(call))
                } else {
                    self.forward_output(call)
                }
            }
            ValueKind::Loss => match self.argument_with_history(call, depth) {
                Some(arg) => Value::new(self.grad_or_plain(call), Basis::Operand(arg)),
                None => Value::unknown(),
            },
            ValueKind::Foreign => Value::new(ValueKind::Foreign, Basis::From(self.field(call, "function").unwrap_or(call))),
            _ => Value::unknown(),
        }
    }

    pub(super) fn method_call_value(&self, call: Node<'t>, callee: Node<'t>, depth: usize) -> Value<'t> {
        let d = depth + 1;
        let Some(object) = self.field(callee, "object") else { return Value::unknown() };
        let method = self.field(callee, "attribute").map(|a| self.text(a)).unwrap_or("");
        if let Some(qualified) = self.qualified_name(callee) {
            if let Some(value) = self.project_call_value(call, method) {
                return value;
            }
            return self.library_value(call, &qualified, depth);
        }
        // `self.load_networks()`, `self.decode(z)`: a method of the class (a method of a
        // module class that runs the forward pass gives its output).
        if self.text(object) == "self" {
            if let Some(class) = self.enclosing_function(call).and_then(|f| f.class.clone()) {
                // Lightning's `self.optimizers()` gives the module's optimizers.
                if method == "optimizers" && self.is_lightning_class(&class) && self.method_of(&class, method).is_none() {
                    return Value::new(ValueKind::Optimizer, Basis::Library(call));
                }
                if let Some(def) = self.method_of(&class, method) {
                    if self.is_module_class(&class) && self.method_runs_forward(def) {
                        return self.forward_output(call);
                    }
                    return self.function_return_value(def, d);
                }
            }
        }
        // `Net.from_config(cfg)`: a method called on a local class itself (a factory
        // classmethod), or on `cls` in one, gives what it returns.
        if object.kind_name() == "identifier" {
            let name = self.text(object);
            let class = if self.classes.contains_key(name) && self.binding_at(name, object).is_some_and(|b| b.statement.kind_name() == "class_definition") {
                Some(name.to_owned())
            } else {
                self.classmethod_class(object)
            };
            if let Some(def) = class.and_then(|c| self.method_of(&c, method)) {
                return self.function_return_value(def, d);
            }
        }
        // `policy.pi(x)` on an instance of a local module class: a method that runs the
        // forward pass gives its output, another one what it returns.
        if let Some(class) = self.instance_class_at(object, d) {
            if let Some(def) = self.method_of(class, method) {
                if method != "forward" {
                    return if self.method_runs_forward(def) { self.forward_output(call) } else { self.function_return_value(def, d) };
                }
            }
        }
        let of = self.value_at_depth(object, d);
        match of.kind {
            ValueKind::GradTensor | ValueKind::PlainTensor => match library::tensor_method(method) {
                Call::Number => Value::new(ValueKind::Number, Basis::Library(call)),
                Call::Foreign => Value::new(ValueKind::Foreign, Basis::Library(call)),
                Call::TensorNoHistory => Value::new(ValueKind::PlainTensor, Basis::Library(call)),
                Call::Backward => Value::unknown(),
                _ if method == "requires_grad_" => Value::new(ValueKind::GradTensor, Basis::From(object)),
                _ => of.via(Basis::From(object)),
            },
            ValueKind::Foreign => match library::foreign_method(method) {
                Call::Number => Value::new(ValueKind::Number, Basis::Library(call)),
                _ => Value::new(ValueKind::Foreign, Basis::From(object)),
            },
            ValueKind::Model | ValueKind::Loss => {
                if library::MODULE_METHODS_RETURNING_SELF.contains(&method) {
                    return of.via(Basis::From(object));
                }
                if method == "forward" {
                    return self.forward_output(call);
                }
                // `self.backbone.layer4(x)`, `model.encoder(x)`: a submodule.
                let callee_value = self.value_at_depth(callee, d);
                if callee_value.kind == ValueKind::Model {
                    return self.forward_output(call);
                }
                // `model.classify(x)`: a method of a project module class that runs the
                // forward pass.
                if of.kind == ValueKind::Model && self.project_network_method_runs_forward(object, method) {
                    return self.forward_output(call);
                }
                Value::unknown()
            }
            // `scaler.scale(loss)`: the scaled loss keeps its history.
            ValueKind::Scaler if method == "scale" => call
                .field("arguments")
                .and_then(|a| a.named_child(0))
                .map(|a| self.value_at_depth(a, d).via(Basis::From(a)))
                .unwrap_or(Value::unknown()),
            ValueKind::Unknown => {
                let callee_value = self.value_at_depth(callee, d);
                self.result_of_calling(call, callee_value, depth)
            }
            _ => Value::unknown(),
        }
    }

    /// The argument of `call` that the function `def` (local) gives back, when every
    /// `return` of it returns one parameter.
    pub(crate) fn argument_returned(&self, def: Node<'t>, call: Node<'t>) -> Option<Node<'t>> {
        let statements = self.named.within(self.field(def, "body")?, returns_below);
        let name = crate::project::returned_parameter(self.source, def, &statements, &self.named)?;
        let params = self.named_children(self.field(def, "parameters")?);
        let position = params.iter().filter_map(|p| parameter_name(*p)).position(|n| self.text(n) == name)?;
        let method = self.functions.get(&def.id()).is_some_and(|f| f.class.is_some());
        let position = if method { position.checked_sub(1)? } else { position };
        self.argument_for(call, &name, Some(position))
    }

    /// What calling a project name returns, when the project knows (see
    /// [`Self::project_call_kind`]); a project function that gives a parameter back
    /// returns that argument.
    pub(super) fn project_call_value(&self, call: Node<'t>, name: &str) -> Option<Value<'t>> {
        if let Some(crate::Symbol::Function { summary, .. }) = self.project_callee(call) {
            if let Some(position) = summary.returns_parameter {
                let argument = self.argument_for(call, "", Some(position))?;
                return Some(self.value_at_depth(argument, 1).via(Basis::From(argument)));
            }
            // `build(Net, cfg)` returning `model_cls(**cfg)`: an instance of the class it
            // is handed (what calling anything else gives is not followed).
            if let Some(argument) = summary.returns_called_parameter.and_then(|p| self.argument_for(call, "", Some(p))) {
                if self.value_at_depth(argument, 1).kind == ValueKind::ModuleClass {
                    let built = self.instance_of_module_class(self.text(argument), call);
                    return Some(Value::new(built.kind, Basis::Handed(argument)));
                }
            }
            // `to_np(t)` returning `t.cpu().detach().numpy()`: what that method gives.
            if let Some(method) = &summary.returns_method {
                let kind = match library::tensor_method(method) {
                    Call::Number => Some(ValueKind::Number),
                    Call::Foreign => Some(ValueKind::Foreign),
                    _ => None,
                };
                if let Some(kind) = kind {
                    return Some(Value::new(kind, Basis::Project(call)));
                }
            }
        }
        let kind = self.project_call_kind(call, name)?;
        Some(match kind {
            ValueKind::Unknown => Value::unknown(),
            kind => Value::new(kind, Basis::Project(call)),
        })
    }

    /// Does the forward pass `call` run without autograd because its module's class runs
    /// its `forward` under `@torch.no_grad()` (a local class, or one of the project)?
    pub(crate) fn forward_runs_without_grad(&self, call: Node<'t>) -> bool {
        self.class_forward_disables_grad(call).is_some()
    }
}
