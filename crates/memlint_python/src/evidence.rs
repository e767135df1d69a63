//! Evidence: the chain of facts a value rests on, in words and places, for findings to
//! show (the terminal, the JSON report and the editor's hover list them). Built by
//! following each value's [`Basis`] back to a construction, a use or a library model.

use std::ops::Range;

use tree_sitter::Node;

use crate::semantic::*;
use crate::values::Basis;
use crate::NodeExt;

/// One fact a finding rests on: what, and where in the module (a byte range).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    pub text: String,
    pub range: Option<Range<usize>>,
}

impl Fact {
    pub fn at(text: impl Into<String>, node: Node<'_>) -> Fact {
        Fact { text: text.into(), range: Some(node.byte_range()) }
    }

    pub fn plain(text: impl Into<String>) -> Fact {
        Fact { text: text.into(), range: None }
    }
}

/// How many steps of a value's basis are told.
const MAX_STEPS: usize = 6;

/// A kind of value, in words.
pub fn describe_kind(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::GradTensor => "a tensor with autograd history",
        ValueKind::PlainTensor => "a tensor without autograd history",
        ValueKind::Number => "a Python number or string",
        ValueKind::Model => "a network (a `torch.nn.Module` instance)",
        ValueKind::Loss => "a loss module",
        ValueKind::ModuleClass => "a class that builds a network",
        ValueKind::Callable => "a function or class",
        ValueKind::Optimizer => "an optimizer",
        ValueKind::Scaler => "a `GradScaler`",
        ValueKind::DataLoader => "a `DataLoader`",
        ValueKind::Foreign => "a value of another framework",
        ValueKind::Unknown => "unknown",
    }
}

impl<'t> SemanticModel<'t> {
    /// A short rendering of a node's text (its first line, at most 60 characters).
    pub fn short_text(&self, node: Node<'_>) -> String {
        let text = self.text(node);
        let first = text.lines().next().unwrap_or("");
        let mut shown: String = first.chars().take(60).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        shown
    }

    /// The 1-based line of a node.
    pub fn line_of(&self, node: Node<'_>) -> usize {
        node.start_position().row + 1
    }

    /// Why `expr` holds what it holds: its kind, then each step of its basis back to the
    /// construction, use or library call that decided it.
    pub fn explain_value(&self, expr: Node<'t>) -> Vec<Fact> {
        let value = self.value(expr);
        let mut facts = vec![Fact::at(format!("`{}` is {}", self.short_text(expr), describe_kind(value.kind)), expr)];
        let mut basis = value.basis;
        let mut steps = 0;
        while steps < MAX_STEPS {
            steps += 1;
            let next = match basis {
                Basis::None | Basis::Literal => break,
                Basis::Built(call) => {
                    facts.push(self.construction_fact(call));
                    break;
                }
                Basis::Library(call) => {
                    facts.push(Fact::at(format!("`{}` (line {}) returns it, by memlint's model of the library", self.short_text(call), self.line_of(call)), call));
                    break;
                }
                Basis::Forward(call) => {
                    facts.push(Fact::at(format!("it is the output of the forward pass `{}` (line {})", self.short_text(call), self.line_of(call)), call));
                    break;
                }
                Basis::Used(call) => {
                    facts.push(Fact::at(
                        format!("`{}` (line {}): only a `torch.nn.Module` (or an optimizer, for `step`/`zero_grad`) has this method", self.short_text(call), self.line_of(call)),
                        call,
                    ));
                    break;
                }
                Basis::Backpropagated(call) => {
                    facts.push(Fact::at(
                        format!("`{}` (line {}) backpropagates it: only a tensor with autograd history can be", self.short_text(call), self.line_of(call)),
                        call,
                    ));
                    break;
                }
                Basis::Definition(node) => {
                    facts.push(Fact::at(format!("defined at line {}", self.line_of(node)), node));
                    break;
                }
                Basis::Project(node) => {
                    facts.push(Fact::at(format!("`{}` is defined in another module of the project", self.short_text(node)), node));
                    break;
                }
                Basis::From(node) => {
                    if self.parent(node).is_some_and(|p| matches!(p.kind_name(), "assignment" | "augmented_assignment")) {
                        facts.push(Fact::at(format!("assigned `{}` (line {})", self.short_text(node), self.line_of(node)), node));
                    }
                    node
                }
                Basis::Passed(argument) => {
                    let call = self.parent(argument).and_then(|p| if p.kind_name() == "keyword_argument" { self.parent(p) } else { Some(p) }).and_then(|a| self.parent(a));
                    let shown = call.map(|c| self.short_text(c)).unwrap_or_else(|| self.short_text(argument));
                    facts.push(Fact::at(format!("its callers pass it: `{shown}` (line {})", self.line_of(argument)), argument));
                    argument
                }
                Basis::Element(container) => {
                    facts.push(Fact::at(format!("an element of `{}` (line {})", self.short_text(container), self.line_of(container)), container));
                    container
                }
                Basis::Handed(argument) => {
                    let call = self.parent(argument).and_then(|a| self.parent(a));
                    let shown = call.map(|c| self.short_text(c)).unwrap_or_else(|| self.short_text(argument));
                    facts.push(Fact::at(
                        format!("`{shown}` (another module of the project) builds the class it is handed, `{}`", self.short_text(argument)),
                        argument,
                    ));
                    argument
                }
                Basis::Fixture(def) => {
                    let name = def.field("name").map(|n| self.text(n)).unwrap_or("?");
                    facts.push(Fact::at(format!("pytest passes it the fixture `{name}` (line {})", self.line_of(def)), def));
                    match self.function_return_value(def, 0).basis {
                        Basis::Returned(value) => {
                            facts.push(Fact::at(format!("returned as `{}` (line {})", self.short_text(value), self.line_of(value)), value));
                            value
                        }
                        _ => break,
                    }
                }
                Basis::Returned(value) => {
                    facts.push(Fact::at(format!("returned as `{}` (line {})", self.short_text(value), self.line_of(value)), value));
                    value
                }
                Basis::Operand(operand) => {
                    facts.push(Fact::at(format!("computed from `{}` (line {})", self.short_text(operand), self.line_of(operand)), operand));
                    operand
                }
            };
            basis = self.value(next).basis;
        }
        facts
    }

    /// What a construction builds: a local class and its base, a library class or
    /// factory, a class of the project.
    fn construction_fact(&self, call: Node<'t>) -> Fact {
        let callee = call.field("function").unwrap_or(call);
        let shown = self.short_text(call);
        let line = self.line_of(call);
        if callee.kind_name() == "identifier" {
            let name = self.text(callee);
            if let Some(def) = self.bindings_of(None, name).and_then(|bs| bs.iter().rev().find(|b| b.statement.kind_name() == "class_definition")) {
                let bases = def.statement.field("superclasses").map(|s| self.text(s)).unwrap_or("()");
                return Fact::at(format!("built by `{shown}` (line {line}): `class {name}{bases}` (line {}) derives `torch.nn.Module`", self.line_of(def.statement)), call);
            }
        }
        if let Some(qualified) = self.qualified_name(callee) {
            if self.project_symbol(&qualified).is_some() {
                return Fact::at(format!("built by `{shown}` (line {line}): `{qualified}` is a `torch.nn.Module` class of the project"), call);
            }
            return Fact::at(format!("built by `{shown}` (line {line}): `{qualified}`"), call);
        }
        Fact::at(format!("built by `{shown}` (line {line})"), call)
    }
}
