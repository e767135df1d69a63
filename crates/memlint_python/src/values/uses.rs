//! Evidence by use: a name (or one element of a container, `nets["g"]`) on which a
//! method only modules have is called (`x.eval()`) is a module; one that is both zeroed and
//! stepped is an optimizer.

use rustc_hash::FxHashMap as HashMap;
use tree_sitter::Node;

use super::*;
use crate::library;
use crate::NodeExt;

impl<'t> SemanticModel<'t> {
    /// An object on which both `.zero_grad()` and `.step()` are called in `scope` (a
    /// module has no `step`, a scheduler no `zero_grad`), or whose `.param_groups` are read:
    /// an optimizer by what is done with it. Gives the `step` call (or the attribute).
    pub(crate) fn optimizer_use(&self, scope: ScopeId, name: &str) -> Option<Node<'t>> {
        let uses = self.optimizers_by_use.get_or_init(|| {
            let on = |call: &Node<'t>| -> Option<(ScopeId, &'t str)> {
                let object = unparenthesize(call.field("function")?.field("object")?);
                match object.kind_name() {
                    "identifier" => Some((self.scope_of(*call), self.text(object))),
                    "attribute" if self.field(object, "object").is_some_and(|o| self.text(o) == "self") => Some((None, self.text(object))),
                    _ => None,
                }
            };
            let zeroed: HashMap<(ScopeId, &'t str), Node<'t>> = self.calls_named("zero_grad").iter().filter_map(|c| Some((on(c)?, *c))).collect();
            let mut uses: HashMap<(ScopeId, &'t str), Node<'t>> = HashMap::default();
            for step in self.calls_named("step") {
                if let Some(key) = on(step) {
                    if zeroed.contains_key(&key) {
                        uses.entry(key).or_insert(*step);
                    }
                }
            }
            for attribute in self.attributes_named_in("param_groups", 0..self.source().len()) {
                if let Some(object) = attribute.field("object").map(unparenthesize) {
                    let key = match object.kind_name() {
                        "identifier" => (self.scope_of(*attribute), self.text(object)),
                        "attribute" if self.field(object, "object").is_some_and(|o| self.text(o) == "self") => (None, self.text(object)),
                        _ => continue,
                    };
                    uses.entry(key).or_insert(*attribute);
                }
            }
            uses
        });
        uses.get(&(scope, name)).copied()
    }

    /// A call on `name` in `scope` of a method only modules have (`name.eval()`,
    /// `name.parameters()`, `name.load_state_dict(...)`): the first such call.
    pub(crate) fn module_use(&self, scope: ScopeId, name: &str) -> Option<Node<'t>> {
        let uses = self.modules_by_use.get_or_init(|| {
            let mut uses: HashMap<(ScopeId, &'t str), Node<'t>> = HashMap::default();
            for method in library::MODULE_ONLY_METHODS {
                for call in self.calls_named(method) {
                    let Some(object) = call.field("function").and_then(|f| f.field("object")) else { continue };
                    let object = unparenthesize(object);
                    match object.kind_name() {
                        "identifier" => {
                            uses.entry((self.scope_of(*call), self.text(object))).or_insert(*call);
                        }
                        "attribute" if self.field(object, "object").map(|o| self.text(o) == "self").unwrap_or(false) => {
                            uses.entry((None, self.text(object))).or_insert(*call);
                        }
                        // `nets["G"].eval()`: one element of a container, in the scope the
                        // container is bound in.
                        "subscript" => {
                            if let Some(key) = self.constant_element_key(object) {
                                uses.entry(key).or_insert(*call);
                            }
                        }
                        _ => {}
                    }
                }
            }
            uses
        });
        uses.get(&(scope, name)).copied()
    }

    /// The backward pass run on what `ident` holds through its binding there:
    /// `loss.backward()`, `(loss / k).backward()`, `scaler.scale(loss).backward()`,
    /// `torch.autograd.backward(loss)`. Backpropagating a tensor without history raises,
    /// so the value carries autograd history whatever built it. A `.backward(x)` with a
    /// positional argument is left out: `accelerator.backward(loss)` is a framework's.
    pub(crate) fn backward_use(&self, ident: Node<'t>) -> Option<Node<'t>> {
        let name = self.text(ident);
        let binding = self.binding_at(name, ident)?.statement.id();
        let same = |n: Node<'t>| {
            let n = unparenthesize(n);
            n.kind_name() == "identifier" && self.text(n) == name && self.binding_at(name, n).map(|b| b.statement.id()) == Some(binding)
        };
        let positional = |call: Node<'t>| {
            self.field(call, "arguments")
                .map(|a| self.named_children(a).into_iter().filter(|x| !matches!(x.kind_name(), "keyword_argument" | "comment")).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        self.backward_calls_in_scope_of(ident).iter().copied().find(|call| {
            let Some(callee) = call.field("function") else { return false };
            if self.qualified_name(callee).as_deref() == Some("torch.autograd.backward") {
                return positional(*call).first().is_some_and(|a| same(*a));
            }
            if callee.kind_name() != "attribute" || self.field(callee, "attribute").is_none_or(|a| self.text(a) != "backward") {
                return false;
            }
            if !positional(*call).is_empty() {
                return false;
            }
            let Some(receiver) = self.field(callee, "object").map(unparenthesize) else { return false };
            match receiver.kind_name() {
                "identifier" => same(receiver),
                "binary_operator" => self.field(receiver, "left").is_some_and(same),
                // scaler.scale(loss).backward()
                "call" => self.field(receiver, "function").is_some_and(|f| f.kind_name() == "attribute")
                    && matches!(positional(receiver).as_slice(), [only] if same(*only)),
                _ => false,
            }
        })
    }

    /// For `c["k"]` / `c[0]` (a name indexed by a literal): the scope `c` is bound in and the
    /// element's text, the key under which uses of that one element are found.
    pub(crate) fn constant_element_key(&self, subscript: Node<'t>) -> Option<(ScopeId, &'t str)> {
        let container = unparenthesize(self.field(subscript, "value")?);
        let index = self.field(subscript, "subscript")?;
        if container.kind_name() != "identifier" || !matches!(index.kind_name(), "string" | "integer") {
            return None;
        }
        let binding = self.binding_at(self.text(container), container)?;
        Some((self.scope_of(binding.statement), self.text(subscript)))
    }

    /// The element `c["k"]` / `c[0]` of a name bound once to a dict or list display, or,
    /// used like a module (`c["k"].eval()`), a network by use.
    pub(super) fn constant_element_value(&self, subscript: Node<'t>, depth: usize) -> Value<'t> {
        let Some(container) = self.field(subscript, "value").map(unparenthesize) else { return Value::unknown() };
        let Some(index) = self.field(subscript, "subscript") else { return Value::unknown() };
        if container.kind_name() == "identifier" {
            if let [binding] = self.bindings_in_scope(self.text(container), container) {
                if let (BindingKind::Assign, Some(value)) = (binding.kind, binding.value.map(unparenthesize)) {
                    let element = match (value.kind_name(), index.kind_name()) {
                        ("dictionary", "string") => self.named_children(value)
                            .into_iter()
                            .filter(|p| p.kind_name() == "pair")
                            .find(|p| p.field("key").is_some_and(|k| self.text(k) == self.text(index)))
                            .and_then(|p| self.field(p, "value")),
                        ("list" | "tuple", "integer") => self.text(index).parse::<usize>().ok().and_then(|i| self.named_children(value).get(i).copied()),
                        _ => None,
                    };
                    if let Some(element) = element {
                        let v = self.value_at_depth(element, depth + 1);
                        if v.kind != ValueKind::Unknown {
                            return v.via(Basis::Element(element));
                        }
                    }
                }
            }
        }
        if let Some((scope, text)) = self.constant_element_key(subscript) {
            if let Some(use_) = self.module_use(scope, text) {
                return Value::new(ValueKind::Model, Basis::Used(use_));
            }
        }
        Value::unknown()
    }
}
