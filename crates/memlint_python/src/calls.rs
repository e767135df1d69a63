//! What a call does: a forward pass, a backward pass, an optimizer step, storing its
//! arguments; which argument a parameter receives.

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::Node;

use crate::NodeExt;
use crate::semantic::*;

impl<'t> SemanticModel<'t> {
    /// Every `backward()` / `torch.autograd.grad` call of the module.
    pub fn backward_calls(&self) -> &[Node<'t>] {
        self.backward_calls.get_or_init(|| self.calls.iter().copied().filter(|c| self.is_backward_call(*c)).collect())
    }

    /// The `backward()` / `torch.autograd.grad` calls in the scope `node` runs in (its
    /// function, or module level), in source order.
    pub fn backward_calls_in_scope_of(&self, node: Node<'t>) -> &[Node<'t>] {
        let by_scope = self.backward_calls_by_scope.get_or_init(|| {
            let mut by_scope: HashMap<ScopeId, Vec<Node<'t>>> = HashMap::default();
            for call in self.backward_calls() {
                by_scope.entry(self.scope_of(*call)).or_default().push(*call);
            }
            by_scope
        });
        by_scope.get(&self.scope_of(node)).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Is a part of what the name `ident` holds backpropagated in its scope
    /// (`out["loss"].backward()`, `out.loss.backward()`), through the same binding? Then it
    /// holds a tensor with history whatever produced it (`out = module.training_step(b)`).
    pub fn part_is_backpropagated(&self, ident: Node<'t>) -> bool {
        if ident.kind_name() != "identifier" {
            return false;
        }
        let name = self.text(ident);
        let binding = self.binding_at(name, ident).map(|b| b.statement.id());
        if binding.is_none() {
            return false;
        }
        self.backward_calls_in_scope_of(ident).iter().any(|call| {
            let Some(receiver) = call.field("function").filter(|f| f.kind_name() == "attribute").and_then(|f| f.field("object")) else {
                return false;
            };
            let receiver = unparenthesize(receiver);
            let base = match receiver.kind_name() {
                "subscript" => self.field(receiver, "value"),
                "attribute" => self.field(receiver, "object"),
                _ => None,
            };
            base.is_some_and(|b| {
                b.kind_name() == "identifier" && self.text(b) == name && self.binding_at(name, b).map(|x| x.statement.id()) == binding
            })
        })
    }

    /// Is `name` backpropagated after `statement` in the same scope (`total.backward()`,
    /// `torch.stack(losses).mean().backward()`, `scaler.scale(total).backward()`)?
    pub fn backpropagated_after(&self, name: &str, statement: Node<'t>) -> bool {
        self.backward_calls_in_scope_of(statement)
            .iter()
            .any(|c| c.start_byte() > statement.start_byte() && self.identifiers_in(*c).iter().any(|n| n == name))
    }

    /// For a call `obj.method(arg, ...)` where `obj` was built from a class (of this
    /// module or imported from the project): the arguments the method stores into state
    /// outliving the call (`self.total += val`), with the argument node passed for each.
    pub fn call_stores_arguments(&self, call: Node<'t>) -> Vec<(Node<'t>, crate::StoredArgument)> {
        let Some(callee) = self.field(call, "function").filter(|c| c.kind_name() == "attribute") else { return Vec::new() };
        let (Some(object), Some(method)) = (self.field(callee, "object"), self.field(callee, "attribute")) else { return Vec::new() };
        let method = self.text(method);
        let Some(class_call) = self.constructor_of(object) else { return Vec::new() };
        let Some(class_callee) = self.field(class_call, "function") else { return Vec::new() };
        let stores: std::sync::Arc<[crate::FunctionSummary]> = match self.local_class_methods(class_callee) {
            Some(methods) => methods.into(),
            None => match self.project_callee(class_call) {
                Some(crate::Symbol::Class { methods, .. }) => methods,
                _ => return Vec::new(),
            },
        };
        let Some(summary) = stores.iter().find(|m| m.name == method) else { return Vec::new() };
        let mut found = Vec::new();
        for stored in summary.stores.iter().cloned() {
            if let Some(arg) = self.argument_for(call, &stored.name, Some(stored.position)) {
                found.push((arg, stored));
            }
        }
        found
    }

    /// The argument of `call` that the parameter `name` receives: passed by keyword, or,
    /// given its `position` among the parameters a caller fills by position (after `self`
    /// for a method; `None` for a keyword-only one), the positional argument there. `None`
    /// when not passed, or when a `*args` at or before that position hides which it is.
    pub fn argument_for(&self, call: Node<'t>, name: &str, position: Option<usize>) -> Option<Node<'t>> {
        let arguments = self.named_children(self.field(call, "arguments")?);
        if let Some(keyword) = arguments
            .iter()
            .find(|a| a.kind_name() == "keyword_argument" && a.field("name").is_some_and(|n| self.text(n) == name))
        {
            return keyword.field("value");
        }
        let positional: Vec<Node<'t>> = arguments.into_iter().filter(|a| a.kind_name() != "keyword_argument").collect();
        let position = position?;
        let upto = positional.get(..=position)?;
        (!upto.iter().any(|a| matches!(a.kind_name(), "list_splat" | "dictionary_splat"))).then(|| upto[position])
    }

    /// The call that built the value of `object` (`meter` after `meter = AverageMeter()`,
    /// `self.meter` after `self.meter = AverageMeter()` in the class).
    pub(crate) fn constructor_of(&self, object: Node<'t>) -> Option<Node<'t>> {
        let value = match object.kind_name() {
            "identifier" => {
                let binding = self.binding_at(self.text(object), object)?;
                if binding.kind != BindingKind::Assign {
                    return None;
                }
                binding.value?
            }
            "attribute" => {
                let obj = self.field(object, "object")?;
                if self.text(obj) != "self" {
                    return None;
                }
                let mut values = self.self_attribute_values(object, self.text(self.field(object, "attribute")?));
                values.find(|v| unparenthesize(*v).kind_name() == "call")?
            }
            _ => return None,
        };
        let value = unparenthesize(value);
        (value.kind_name() == "call").then_some(value)
    }

    /// The value of the keyword argument `name` of `call`, if given.
    pub fn keyword_value(&self, call: Node<'t>, name: &str) -> Option<Node<'t>> {
        let arguments = self.field(call, "arguments")?;
        self.named_children(arguments)
            .into_iter()
            .filter(|a| a.kind_name() == "keyword_argument")
            .find(|a| a.field("name").is_some_and(|k| self.text(k) == name))
            .and_then(|a| self.field(a, "value"))
    }

    /// Every identifier (and attribute's last part) inside an expression, as dotted names.
    pub fn identifiers_in(&self, expr: Node<'t>) -> Vec<String> {
        let mut names = Vec::new();
        let mut stack = vec![expr];
        while let Some(n) = stack.pop() {
            match n.kind_name() {
                "identifier" => names.push(self.text(n).to_owned()),
                "attribute" => {
                    if let Some(d) = self.dotted_name(n) {
                        names.push(d);
                    }
                    if let Some(o) = self.field(n, "object") {
                        stack.push(o);
                    }
                }
                "string" => {}
                _ => stack.extend(self.named_children(n)),
            }
        }
        names
    }

    /// `x.backward(...)` on a tensor, or `torch.autograd.backward(x)` / `torch.autograd.grad(...)`.
    pub fn is_backward_call(&self, call: Node<'t>) -> bool {
        let Some(callee) = self.field(call, "function") else { return false };
        if callee.kind_name() == "attribute" {
            let attr = self.field(callee, "attribute").map(|a| self.text(a));
            if attr == Some("backward") {
                return true;
            }
            // A qualified name ends as the callee does: of the rest, only `….grad` can be
            // `torch.autograd.grad` (and most calls are methods; resolving each cost more
            // than the rest of this question).
            if attr != Some("grad") {
                return false;
            }
        }
        matches!(
            self.qualified_name(callee).as_deref(),
            Some("torch.autograd.backward" | "torch.autograd.grad")
        )
    }

    /// `accelerator.backward(loss)`, `model_engine.backward(loss)`, `fabric.backward(loss)`:
    /// `x.backward(loss)` where `x` is not a tensor and the loss carries history. The
    /// backward of a framework that holds the model, which scales the loss (and divides it
    /// for its own gradient accumulation) itself. `y.backward(grad)` is a tensor's.
    pub fn is_framework_backward(&self, call: Node<'t>) -> bool {
        let Some(receiver) = self.field(call, "function").filter(|f| f.kind_name() == "attribute").and_then(|f| self.field(f, "object")) else {
            return false;
        };
        let receiver_is_tensor = matches!(self.value_kind(receiver), ValueKind::GradTensor | ValueKind::PlainTensor);
        let loss = self.field(call, "arguments").and_then(|a| self.named_children(a).into_iter().find(|n| n.kind_name() != "keyword_argument" && n.kind_name() != "comment"));
        !receiver_is_tensor && loss.is_some_and(|l| self.has_autograd_history(l))
    }

    /// `optimizer.step()` on an optimizer (built by `torch.optim`, passed by every caller
    /// that passes a known value, or an object that is both stepped and zeroed) or
    /// `scaler.step(opt)` on a `GradScaler`.
    pub fn is_optimizer_step(&self, call: Node<'t>) -> bool {
        let Some(callee) = self.field(call, "function").filter(|c| c.kind_name() == "attribute") else {
            return false;
        };
        let attr = self.field(callee, "attribute").map(|a| self.text(a));
        if attr != Some("step") {
            return false;
        }
        self.field(callee, "object").is_some_and(|o| matches!(self.value_kind(o), ValueKind::Optimizer | ValueKind::Scaler))
    }

    /// Is `call` a forward pass of a model: `model(x)`, `self.encoder(x)`, `model.forward(x)`,
    /// or `self(x)` in a `Module` subclass? Loss modules are not models.
    pub fn is_forward_call(&self, call: Node<'t>) -> bool {
        self.forward_callee(call).is_some()
    }

    /// The module expression a forward call calls (`model` in `model(x)` and `model.forward(x)`).
    pub fn forward_callee(&self, call: Node<'t>) -> Option<Node<'t>> {
        // `with fabric.sharded_model():`: what a `with` enters is a context manager, not a
        // network's output, whatever the callee is called.
        let parent = self.parent(call);
        let entered = parent.is_some_and(|p| {
            p.kind_name() == "with_item" || (p.kind_name() == "as_pattern" && self.parent(p).is_some_and(|g| g.kind_name() == "with_item"))
        });
        if entered {
            return None;
        }
        let module = self.forward_callee_by_value(call)?;
        // A class, function or module of the project is not a module instance: calling it
        // builds one (`Generator(cfg)`), or runs code that is not a forward pass. (Asked
        // last: the answer may read another module.)
        if self.project_callee(call).is_some() {
            return None;
        }
        Some(module)
    }

    pub(crate) fn forward_callee_by_value(&self, call: Node<'t>) -> Option<Node<'t>> {
        let callee = self.field(call, "function")?;
        if callee.kind_name() == "attribute" {
            let attr = self.field(callee, "attribute").map(|a| self.text(a));
            if attr == Some("forward") {
                // `self.forward(x)` only in a module class: a trainer's own `forward` method
                // is no network's.
                let object = self.field(callee, "object")?;
                return (self.value_kind(object) == ValueKind::Model).then_some(object);
            }
        }
        if callee.kind_name() == "identifier" && self.text(callee) == "self" {
            let class = self.enclosing_function(call)?.class.clone()?;
            return self.is_module_class(&class).then_some(callee);
        }
        if callee.kind_name() == "attribute" {
            let method = self.field(callee, "attribute").map(|a| self.text(a)).unwrap_or("");
            let object = self.field(callee, "object")?;
            // `self.decode(z)` in a module class: a method of the class that runs the forward
            // pass (its submodules) is a forward pass of `self`.
            if self.text(object) == "self" {
                let class = self.enclosing_function(call)?.class.clone()?;
                if let Some(def) = self.method_of(&class, method) {
                    return (self.is_module_class(&class) && self.method_runs_forward(def)).then_some(object);
                }
            }
            // `nn.parallel.data_parallel(netG, inputs, gpus)`: a forward of its first argument.
            if method == "data_parallel" && self.qualified_name(callee).as_deref() == Some("torch.nn.parallel.data_parallel") {
                let module = self.field(call, "arguments").and_then(|a| a.named_child(0))?;
                return (self.value_kind(module) == ValueKind::Model).then_some(module);
            }
            // `policy.pi(x)`, `model.sample(z)`: a method of a local module class that runs
            // the forward pass, called on an instance (of that class, or a module whose
            // class is not known here: then any local module class's method of that name).
            if let Some(class) = self.instance_class(object) {
                if let Some(def) = self.method_of(class, method) {
                    return self.method_runs_forward(def).then_some(object);
                }
            } else if method != "forward"
                && self.value_kind(object) == ValueKind::Model
                && (self.some_module_method_runs_forward(method) || self.project_network_method_runs_forward(object, method))
            {
                return Some(object);
            }
        }
        (self.value_kind(callee) == ValueKind::Model).then_some(callee)
    }
}
