//! Constants: what a non-literal argument holds when the program fixes it — a literal, a
//! name bound once to a literal (a module-level constant, a local), or a command-line
//! option's argparse default (`args.accum_steps` after
//! `parser.add_argument("--accum-steps", type=int, default=4)`). An analysis beside the
//! semantic model, built from its bindings and call index.

use tree_sitter::Node;

use crate::semantic::{named_children, unparenthesize, BindingKind, SemanticModel};
use crate::NodeExt;

/// A constant value.
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl Constant {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Constant::Int(i) => Some(*i as f64),
            Constant::Float(f) => Some(*f),
            _ => None,
        }
    }
}

/// What `expr` holds when it is fixed by the program: a literal, a name whose every
/// binding in its scope (or at module level) is the same constant, or `<obj>.<option>`
/// where `<option>` is an argparse option of this module with a literal `default`
/// (options set on the command line can differ: the default is what users run unless
/// they say otherwise, and it is what the code's author chose).
pub fn constant_value<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> Option<Constant> {
    constant_at(model, expr, 0)
}

fn constant_at<'t>(model: &SemanticModel<'t>, expr: Node<'t>, depth: usize) -> Option<Constant> {
    if depth > 8 {
        return None;
    }
    let expr = unparenthesize(expr);
    match expr.kind_name() {
        "integer" => parse_int(model.text(expr)).map(Constant::Int),
        "float" => model.text(expr).replace('_', "").parse().ok().map(Constant::Float),
        "true" => Some(Constant::Bool(true)),
        "false" => Some(Constant::Bool(false)),
        "string" => string_literal(model, expr).map(Constant::Str),
        "unary_operator" => {
            let operand = constant_at(model, expr.field("argument")?, depth + 1)?;
            let op = model.text(expr).trim_start().chars().next()?;
            match (op, operand) {
                ('-', Constant::Int(i)) => Some(Constant::Int(-i)),
                ('-', Constant::Float(f)) => Some(Constant::Float(-f)),
                ('+', c) => Some(c),
                _ => None,
            }
        }
        "identifier" => {
            let mut value = None;
            for b in every_binding(model, expr)? {
                if b.kind != BindingKind::Assign {
                    return None;
                }
                // `a, b = 1, 2` binds the whole right side: not followed.
                let v = b.value?;
                if matches!(v.kind_name(), "expression_list" | "tuple") {
                    return None;
                }
                let c = constant_at(model, v, depth + 1)?;
                match &value {
                    None => value = Some(c),
                    Some(previous) if *previous == c => {}
                    Some(_) => return None,
                }
            }
            value
        }
        "attribute" => {
            let option = model.text(expr.field("attribute")?);
            argparse_default(model, option).and_then(|d| constant_at(model, d, depth + 1))
        }
        _ => None,
    }
}

/// How many elements the list or tuple `expr` holds when the program fixes it: a literal
/// without splats (`[0]`, `(0, 1)`), or a name whose every binding in its scope is such a
/// literal of that length (`device_ids = [0]`).
pub fn fixed_sequence_length<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> Option<usize> {
    let expr = unparenthesize(expr);
    match expr.kind_name() {
        "list" | "tuple" => {
            let elements = named_children(expr);
            (!elements.iter().any(|e| matches!(e.kind_name(), "list_splat" | "list_comprehension" | "generator_expression" | "comment")))
                .then_some(elements.len())
        }
        "identifier" => {
            let mut length = None;
            for b in every_binding(model, expr)? {
                let v = b.value.filter(|_| b.kind == BindingKind::Assign)?;
                let n = match unparenthesize(v).kind_name() {
                    "list" | "tuple" => fixed_sequence_length(model, v)?,
                    _ => return None,
                };
                match length {
                    None => length = Some(n),
                    Some(previous) if previous == n => {}
                    Some(_) => return None,
                }
            }
            length
        }
        _ => None,
    }
}

/// Every binding of the name `ident` in the scope of the one it sees (the one it sees alone
/// when that binding is another scope's): a value fixed by the program must be the same in
/// each.
fn every_binding<'t>(model: &SemanticModel<'t>, ident: Node<'t>) -> Option<Vec<crate::semantic::Binding<'t>>> {
    let name = model.text(ident);
    let binding = model.binding_at(name, ident)?;
    let scope_bindings = model.bindings_in_scope(name, binding.statement);
    Some(if scope_bindings.iter().any(|b| b.statement.id() == binding.statement.id()) {
        scope_bindings.to_vec()
    } else {
        vec![*binding]
    })
}

fn parse_int(text: &str) -> Option<i64> {
    let t = text.replace('_', "").to_ascii_lowercase();
    if let Some(hex) = t.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    t.parse().ok()
}

/// The text of a plain string literal (no f-string interpolation, no concatenation).
fn string_literal<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> Option<String> {
    if named_children(expr).iter().any(|c| c.kind_name() == "interpolation") {
        return None;
    }
    let text = model.text(expr);
    let body = text.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let quote = if body.starts_with("\"\"\"") || body.starts_with("'''") { 3 } else { 1 };
    if body.len() < 2 * quote {
        return None;
    }
    Some(body[quote..body.len() - quote].to_owned())
}

/// The `default=` of the argparse option whose destination is `dest` (`--accum-steps`
/// and `--accum_steps` give `accum_steps`; `dest=` wins), when exactly one
/// `add_argument` of this module declares it.
pub fn argparse_default<'t>(model: &SemanticModel<'t>, dest: &str) -> Option<Node<'t>> {
    let mut found = None;
    for call in model.calls_named("add_argument") {
        let Some(args) = call.field("arguments") else { continue };
        let args = named_children(args);
        let keyword = |name: &str| {
            args.iter()
                .find(|a| a.kind_name() == "keyword_argument" && a.field("name").map(|n| model.text(n) == name).unwrap_or(false))
                .and_then(|a| a.field("value"))
        };
        let declared = match keyword("dest").and_then(|d| string_literal(model, d)) {
            Some(d) => d,
            None => {
                // The first long option, else the first name.
                let names: Vec<String> = args
                    .iter()
                    .filter(|a| a.kind_name() == "string")
                    .filter_map(|a| string_literal(model, *a))
                    .collect();
                let long = names.iter().find(|n| n.starts_with("--")).or_else(|| names.first());
                match long {
                    Some(n) => n.trim_start_matches('-').replace('-', "_"),
                    None => continue,
                }
            }
        };
        if declared != dest {
            continue;
        }
        let Some(default) = keyword("default") else { continue };
        if found.is_some() {
            return None;
        }
        found = Some(default);
    }
    found
}

/// The boolean an expression holds by default: a constant, or an argparse
/// `store_true` / `store_false` flag (`args.flag` is False / True unless given).
pub fn bool_default<'t>(model: &SemanticModel<'t>, expr: Node<'t>) -> Option<bool> {
    if let Some(Constant::Bool(b)) = constant_value(model, expr) {
        return Some(b);
    }
    let expr = unparenthesize(expr);
    if expr.kind_name() != "attribute" {
        return None;
    }
    let dest = model.text(expr.field("attribute")?);
    let mut found = None;
    for call in model.calls_named("add_argument") {
        let Some(args) = call.field("arguments") else { continue };
        let args = named_children(args);
        let names: Vec<String> = args.iter().filter(|a| a.kind_name() == "string").filter_map(|a| string_literal(model, *a)).collect();
        let long = names.iter().find(|n| n.starts_with("--")).or_else(|| names.first());
        let keyword = |name: &str| {
            args.iter()
                .find(|a| a.kind_name() == "keyword_argument" && a.field("name").map(|n| model.text(n) == name).unwrap_or(false))
                .and_then(|a| a.field("value"))
        };
        let declared = keyword("dest")
            .and_then(|d| string_literal(model, d))
            .or_else(|| long.map(|n| n.trim_start_matches('-').replace('-', "_")));
        if declared.as_deref() != Some(dest) || keyword("default").is_some() {
            continue;
        }
        let action = keyword("action").and_then(|a| string_literal(model, a));
        let value = match action.as_deref() {
            Some("store_true") => false,
            Some("store_false") => true,
            _ => continue,
        };
        if found.is_some() {
            return None;
        }
        found = Some(value);
    }
    found
}
