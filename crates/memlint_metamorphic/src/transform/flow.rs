//! What moving code needs to know of the control flow around it: is a name certainly
//! bound when a statement starts, and which `with` managers never swallow an exception.

use memlint_python::tree_sitter::Node;

use super::{named_children, Module};
use crate::scope::{BindingKind, ScopeKind, SymbolId};

/// Is `symbol` certainly bound when `statement` starts to run? Conservative: `true` only
/// for a parameter never deleted, a name bound by a statement that runs unconditionally
/// before `statement` in the same function (an earlier statement of the same block or of
/// an enclosing block), the target of an enclosing `for` / `with` / `except`, a name bound
/// by `:=` in an enclosing `if`'s condition, or a module-level name read from a function
/// (read when the function runs, as the original read it).
pub(crate) fn bound_before(module: &Module, statement: Node, symbol: SymbolId) -> bool {
    let scopes = &module.scopes;
    let sym = scopes.symbol(symbol);
    let bindings: Vec<_> = scopes.bindings_of(symbol).collect();
    if bindings.iter().any(|o| o.binding == Some(BindingKind::Del)) {
        return false;
    }
    if bindings.iter().any(|o| o.binding == Some(BindingKind::Param)) {
        return true;
    }
    let here = scopes.scope_at(statement.start_byte());
    if sym.scope == 0 && here != 0 && scopes.scopes[here].kind != ScopeKind::Class {
        return true;
    }
    let binds_at = |range: std::ops::Range<usize>, kinds: &[BindingKind]| {
        bindings.iter().any(|o| o.binding.is_some_and(|b| kinds.contains(&b)) && range.start <= o.range.start && o.range.end <= range.end)
    };
    let mut at = statement;
    loop {
        let mut previous = at.prev_named_sibling();
        while let Some(p) = previous {
            if binds_unconditionally(module, p, &bindings) {
                return true;
            }
            previous = p.prev_named_sibling();
        }
        let Some(block) = at.parent() else { return false };
        let Some(owner) = (if block.kind() == "block" { block.parent() } else { None }) else { return false };
        match owner.kind() {
            "function_definition" | "class_definition" | "lambda" => return false,
            "for_statement" if owner.child_by_field_name("body").is_some_and(|b| b.id() == block.id()) => {
                if let Some(left) = owner.child_by_field_name("left") {
                    if binds_at(left.byte_range(), &[BindingKind::For]) {
                        return true;
                    }
                }
            }
            "with_statement" => {
                if let Some(clause) = named_children(owner).into_iter().find(|c| c.kind() == "with_clause") {
                    if binds_at(clause.byte_range(), &[BindingKind::With]) {
                        return true;
                    }
                }
            }
            "except_clause" | "except_group_clause" => {
                let header = owner.start_byte()..block.start_byte();
                if binds_at(header, &[BindingKind::Except]) {
                    return true;
                }
            }
            "if_statement" | "elif_clause" | "while_statement" => {
                if let Some(condition) = owner.child_by_field_name("condition") {
                    if binds_at(condition.byte_range(), &[BindingKind::Walrus]) {
                        return true;
                    }
                }
            }
            _ => {}
        }
        // Up to the statement that holds the block (an `elif`/`else`/`except` clause's statement).
        let mut up = owner;
        while matches!(up.kind(), "elif_clause" | "else_clause" | "except_clause" | "except_group_clause" | "finally_clause") {
            match up.parent() {
                Some(p) => up = p,
                None => return false,
            }
        }
        at = up;
        if at.parent().is_none() {
            return false;
        }
    }
}

/// Does statement `p` bind the symbol (given its bindings) whenever it completes normally?
pub(crate) fn binds_unconditionally(module: &Module, p: Node, bindings: &[&crate::scope::Occurrence]) -> bool {
    let range = p.byte_range();
    let bound_here = |kinds: &[BindingKind]| {
        bindings.iter().any(|o| o.binding.is_some_and(|b| kinds.contains(&b)) && o.binder == range)
    };
    match p.kind() {
        "expression_statement" => bound_here(&[BindingKind::Assign, BindingKind::AugAssign]),
        "import_statement" | "import_from_statement" => bound_here(&[BindingKind::Import]),
        "function_definition" | "class_definition" | "decorated_definition" => bound_here(&[BindingKind::Def, BindingKind::Class]),
        "with_statement" if with_never_swallows(module, p) => {
            let Some(clause) = named_children(p).into_iter().find(|c| c.kind() == "with_clause") else { return false };
            if bindings.iter().any(|o| o.binding == Some(BindingKind::With) && clause.byte_range().contains(&o.range.start)) {
                return true;
            }
            p.child_by_field_name("body")
                .is_some_and(|body| named_children(body).into_iter().any(|s| binds_unconditionally(module, s, bindings)))
        }
        _ => false,
    }
}

/// Context managers known not to suppress exceptions (their body either completes or the
/// exception leaves the `with`): gradient modes, autocast, files, profilers, devices.
pub(crate) fn with_never_swallows(module: &Module, with: Node) -> bool {
    let Some(clause) = named_children(with).into_iter().find(|c| c.kind() == "with_clause") else { return false };
    named_children(clause).into_iter().all(|item| {
        let Some(mut value) = item.child_by_field_name("value") else { return false };
        if value.kind() == "as_pattern" {
            match value.named_child(0) {
                Some(v) => value = v,
                None => return false,
            }
        }
        let callee = if value.kind() == "call" { value.child_by_field_name("function") } else { Some(value) };
        let Some(callee) = callee else { return false };
        let text = module.text(callee);
        let last = text.rsplit('.').next().unwrap_or(text);
        matches!(
            last,
            "no_grad" | "inference_mode" | "enable_grad" | "set_grad_enabled" | "autocast" | "open" | "profile" | "record_function"
                | "device" | "nullcontext" | "stream" | "sdp_kernel" | "sdpa_kernel" | "amp" | "detect_anomaly"
        )
    })
}
