//! Renaming every name the file binds: to neutral names (`v1`, `f2`, `C3`, `a4`), or to
//! names that say the opposite of the value's role (a network named `loader`, a batch
//! named `model`, a training function named `evaluate`, a loss named `preds`).
//!
//! **Why behaviour is kept.** Python finds a variable by its scope, not its spelling: a
//! symbol (one name in one scope, found by [`crate::scope`]'s rules) renamed at its every
//! binding and use, to a name the file uses nowhere else, reads and writes the same
//! values. A parameter renamed is renamed at the keyword arguments of every call of its
//! function; a `self.X` attribute at its every access.
//!
//! **Where it refuses.** Names other code can reach by spelling are kept: imported names,
//! builtins, dunders, `self`/`cls`, class-body names (class attributes and methods: they
//! are attributes), names in `__all__` or used by other modules of the project
//! ([`super::Context::protected`]), module-level `test*`/`Test*` names (a test runner finds
//! them by spelling), lambda parameters, and the keyword argument names of
//! calls to anything not defined in the file. A function's parameters are renamed only
//! when every use of the function in the file is a call without `**` (so no caller the
//! file does not show can pass them by keyword) and its decorators are
//! `staticmethod`/`classmethod`/`no_grad`-like; a method's only when it is not a dunder or
//! `forward`, its name is defined once among the file's classes, its class derives from
//! nothing but `object`, `nn.Module` or such classes of the file, every `.name` of the
//! file is a call, and the calls that pass a parameter by keyword are `self.name(...)`
//! in the same class (on another receiver it could be a library method of the same name). A `self.X` is renamed only when every `.X` of the file is on
//! `self`, it is assigned in the file, it is not a class-body name or a string given to
//! `getattr`-like builtins, its classes derive as above, and, when the file reads or loads
//! a `state_dict` (whose keys are attribute names), the class derives from nothing. A file
//! that reaches names by spelling (`eval`, `exec`, `locals()`, `globals()`, `vars()`) or
//! uses `match` patterns, type parameters or `__slots__` is not rewritten.

use std::collections::{HashMap, HashSet};

use memlint_python::tree_sitter::Node;

use super::{descendants, named_children, Context, Module};
use crate::rewrite::Editor;
use crate::scope::{BindingKind, ScopeKind, SymbolId};
use crate::Rewrite;

/// What a renamed name was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Variable,
    Function { trains: bool },
    Class { module: bool },
    Attribute,
}

/// Renames to `v1`, `f2`, `C3`, `a4` (one counter).
pub fn neutral(source: &str, ctx: &Context) -> Option<Rewrite> {
    let mut counter = 0;
    rename(source, ctx, &mut |kind, _old, fresh| {
        let prefix = match kind {
            Kind::Variable => "v",
            Kind::Function { .. } => "f",
            Kind::Class { .. } => "C",
            Kind::Attribute => "a",
        };
        loop {
            counter += 1;
            let name = format!("{prefix}{counter}");
            if !fresh.is_taken(&name) {
                return fresh.take(&name);
            }
        }
    })
}

/// Renames each name to one of the words that say the opposite role: names of networks
/// get data words, data names get network words, losses get prediction words and back,
/// a function that backpropagates gets an evaluation word and any other a training word,
/// a `torch.nn.Module` class gets a data class's name. Words are taken in a fixed order
/// per role (a permutation of [`WORDS`]), with a number added when a word is taken.
pub fn misleading(source: &str, ctx: &Context) -> Option<Rewrite> {
    let mut turns: HashMap<&'static str, usize> = HashMap::new();
    rename(source, ctx, &mut |kind, old, fresh| {
        let (role, words): (&'static str, &[&str]) = match kind {
            Kind::Function { trains: true } => ("train-fn", &["evaluate", "validate", "predict", "test", "inference", "sample"]),
            Kind::Function { trains: false } => ("eval-fn", &["train_step", "train", "fit", "train_one_epoch", "training_step", "optimize"]),
            Kind::Class { module: true } => ("module-class", &["Dataset", "DataLoader", "Batch", "Tokenizer", "Sampler"]),
            Kind::Class { module: false } => ("class", &["Model", "Net", "Classifier", "Generator", "Encoder"]),
            Kind::Variable | Kind::Attribute => {
                let role = role_of(old);
                (role, opposite(role))
            }
        };
        let turn = turns.entry(role).or_default();
        let word = words[*turn % words.len()];
        *turn += 1;
        fresh.take(word)
    })
}

/// Every word a misleading name is taken from, in the order of [`opposite`]'s lists.
pub const WORDS: &[&str] = &[
    "loader", "batch", "images", "dataset", "inputs", "val_loader", "model", "net", "encoder", "generator", "classifier", "preds",
    "outputs", "logits", "predictions", "loss", "total_loss", "criterion", "train_loader", "optimizer", "scaler",
];

fn opposite(role: &str) -> &'static [&'static str] {
    match role {
        "network" => &["loader", "batch", "images", "dataset", "inputs", "val_loader"],
        "data" => &["model", "net", "encoder", "generator", "classifier"],
        "loss" => &["preds", "outputs", "logits", "predictions"],
        "output" => &["loss", "total_loss", "criterion"],
        "optimizer" => &["model", "loader", "criterion"],
        _ => &["val_loader", "model", "preds", "loss", "optimizer", "net", "train_loader", "outputs", "criterion", "batch", "scaler", "logits"],
    }
}

/// The role a name says, from its words (`val_loader`: data; `netG`: network).
fn role_of(name: &str) -> &'static str {
    let words = split_words(name);
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    if has(&["loss", "losses", "criterion", "cost", "nll", "kl", "mse", "l1", "bce", "ce"]) {
        "loss"
    } else if has(&["out", "output", "outputs", "logits", "logit", "pred", "preds", "prediction", "predictions", "scores", "probs", "hat", "recon"]) {
        "output"
    } else if has(&["optimizer", "optim", "opt", "scheduler", "sched", "scaler"]) {
        "optimizer"
    } else if has(&[
        "model", "net", "network", "encoder", "decoder", "generator", "discriminator", "backbone", "classifier", "actor", "critic",
        "policy", "module", "unet", "vae", "gan", "bert", "resnet", "teacher", "student", "head", "layer", "layers", "ema", "g", "d",
        "netg", "netd", "enc", "dec", "disc", "gen",
    ]) {
        "network"
    } else if has(&[
        "loader", "dataloader", "data", "batch", "batches", "dataset", "x", "y", "inputs", "input", "images", "image", "imgs", "img",
        "labels", "label", "target", "targets", "sample", "samples", "feats", "features", "noise", "z", "tokens", "ids", "iterator",
    ]) {
        "data"
    } else {
        "other"
    }
}

fn split_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if c == '_' || c.is_ascii_digit() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Module-level names a test runner finds by their spelling (`test_*`, `Test*`).
pub(crate) fn is_test_name(name: &str) -> bool {
    name.starts_with("test") || name.starts_with("Test")
}

/// Attributes `torch.nn.Module` itself reads or sets: never renamed.
const MODULE_ATTRIBUTES: &[&str] = &["training", "forward", "eval", "train", "device", "dtype"];

/// Decorators that keep a function's parameters private to the file's calls.
fn decorator_keeps_parameters(text: &str) -> bool {
    let name = text.trim_start_matches('@').trim();
    let head = name.split('(').next().unwrap_or(name);
    let last = head.rsplit('.').next().unwrap_or(head);
    matches!(last, "staticmethod" | "classmethod" | "no_grad" | "inference_mode" | "enable_grad" | "set_grad_enabled")
}

/// Renames what can be renamed, asking `name_for` for each new name.
fn rename(source: &str, ctx: &Context, name_for: &mut dyn FnMut(Kind, &str, &mut crate::rewrite::FreshNames) -> String) -> Option<Rewrite> {
    let module = Module::parse(source)?;
    if module.scopes.dynamic {
        return None;
    }
    let mut slots = false;
    descendants(module.root(), &mut |n| {
        if n.kind() == "identifier" && &source[n.byte_range()] == "__slots__" {
            slots = true;
        }
    });
    if slots {
        return None;
    }
    let plan = Plan::new(&module, ctx);
    // A name renamed at every one of its identifiers is free again for a new name.
    let mut renamed_ranges: HashSet<std::ops::Range<usize>> = plan.keywords.iter().map(|(r, _)| r.clone()).collect();
    renamed_ranges.extend(plan.attribute_uses.iter().map(|(r, _)| r.clone()));
    for id in &plan.symbols {
        renamed_ranges.extend(module.scopes.occurrences_of(*id).map(|o| o.range.clone()));
    }
    let mut remaining = Vec::new();
    descendants(module.root(), &mut |n| {
        if n.kind() == "identifier" && !renamed_ranges.contains(&n.byte_range()) {
            remaining.push(source[n.byte_range()].to_owned());
        }
    });
    *module.fresh.borrow_mut() = crate::rewrite::FreshNames::from_taken(remaining);
    // Numbering follows the first occurrence in the file.
    let mut order: Vec<(usize, Target)> = Vec::new();
    for id in &plan.symbols {
        let first = module.scopes.occurrences_of(*id).map(|o| o.range.start).min().unwrap_or(0);
        order.push((first, Target::Symbol(*id)));
    }
    for (attr, first) in &plan.attributes {
        order.push((*first, Target::Attribute(attr.clone())));
    }
    order.sort_by_key(|(at, t)| (*at, t.clone()));
    let mut symbol_names: HashMap<SymbolId, String> = HashMap::new();
    let mut attribute_names: HashMap<String, String> = HashMap::new();
    for (_, target) in order {
        match target {
            Target::Symbol(id) => {
                let old = module.scopes.symbol(id).name.clone();
                let kind = plan.kinds.get(&id).copied().unwrap_or(Kind::Variable);
                let new = name_for(kind, &old, &mut module.fresh.borrow_mut());
                symbol_names.insert(id, new);
            }
            Target::Attribute(attr) => {
                let new = name_for(Kind::Attribute, &attr, &mut module.fresh.borrow_mut());
                attribute_names.insert(attr, new);
            }
        }
    }
    let mut editor = Editor::new(source, &module.tree);
    for o in &module.scopes.occurrences {
        if let Some(new) = o.symbol.and_then(|s| symbol_names.get(&s)) {
            editor.replace(o.range.clone(), new.clone());
        }
    }
    for (range, param) in &plan.keywords {
        if let Some(new) = symbol_names.get(param) {
            editor.replace(range.clone(), new.clone());
        }
    }
    for (range, attr) in &plan.attribute_uses {
        if let Some(new) = attribute_names.get(attr) {
            editor.replace(range.clone(), new.clone());
        }
    }
    if editor.is_empty() {
        return None;
    }
    editor.finish(Vec::new())
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Symbol(SymbolId),
    Attribute(String),
}

/// What one file's rename changes.
struct Plan {
    symbols: Vec<SymbolId>,
    kinds: HashMap<SymbolId, Kind>,
    /// Keyword argument names at calls of the file's functions, with the parameter's symbol.
    keywords: Vec<(std::ops::Range<usize>, SymbolId)>,
    /// `self.X` attributes renamed, with their first occurrence.
    attributes: Vec<(String, usize)>,
    attribute_uses: Vec<(std::ops::Range<usize>, String)>,
}

impl Plan {
    fn new(module: &Module, ctx: &Context) -> Plan {
        let source = module.source;
        let scopes = &module.scopes;
        let exported = module.exported();
        let text = |n: Node| &source[n.byte_range()];

        // Functions whose parameters can be renamed, with the keyword arguments of their calls.
        let mut open_parameters: HashSet<SymbolId> = HashSet::new();
        let mut keywords = Vec::new();
        let mut kinds = HashMap::new();
        let classes = ClassInfo::new(module);
        let method_defs: HashMap<String, usize> = {
            let mut counts = HashMap::new();
            for f in module.nodes_of("function_definition") {
                if enclosing_class(f).is_some() {
                    if let Some(name) = f.child_by_field_name("name") {
                        *counts.entry(text(name).to_owned()).or_insert(0) += 1;
                    }
                }
            }
            counts
        };
        for f in module.nodes_of("function_definition") {
            let Some(name) = f.child_by_field_name("name") else { continue };
            let Some(scope) = scopes.scope_of_node(f.byte_range()) else { continue };
            let trains = {
                let mut found = false;
                descendants(f, &mut |n| {
                    if n.kind() == "call" {
                        if let Some(func) = n.child_by_field_name("function").filter(|f| f.kind() == "attribute") {
                            if func.child_by_field_name("attribute").is_some_and(|a| text(a) == "backward") {
                                found = true;
                            }
                        }
                    }
                });
                found
            };
            if let Some(symbol) = scopes.symbol_at(name.byte_range()) {
                kinds.insert(symbol, Kind::Function { trains });
            }
            let params: Vec<SymbolId> = scopes
                .occurrences
                .iter()
                .filter(|o| o.scope == scope && o.binding == Some(BindingKind::Param))
                .filter_map(|o| o.symbol)
                .collect();
            let decorated_ok = f
                .parent()
                .filter(|p| p.kind() == "decorated_definition")
                .map(|p| named_children(p).into_iter().filter(|d| d.kind() == "decorator").all(|d| decorator_keeps_parameters(text(d))))
                .unwrap_or(true);
            if !decorated_ok {
                continue;
            }
            let mut sites: Vec<Node> = Vec::new();
            let closed = if let Some(class) = enclosing_class(f) {
                let method = text(name);
                let plain_base = classes.plain(class);
                let unique = method_defs.get(method) == Some(&1);
                let dunder = method.starts_with("__") && method.ends_with("__");
                let mut all_calls = true;
                for attr in module.nodes_of("attribute") {
                    if attr.child_by_field_name("attribute").is_some_and(|a| text(a) == method) {
                        match call_of(attr) {
                            Some(call) if !has_dict_splat(call) => sites.push(call),
                            _ => all_calls = false,
                        }
                    }
                }
                let named_in_class_body = scopes
                    .symbol_at(name.byte_range())
                    .is_some_and(|s| scopes.occurrences_of(s).any(|o| o.binding.is_none()));
                // A call that passes a parameter by keyword must be `self.m(...)` in the
                // same class: on any other receiver it may be a library object's method
                // of the same name, whose keywords must stay.
                let param_names: HashSet<&str> = params.iter().map(|p| scopes.symbol(*p).name.as_str()).collect();
                let keywords_on_self = sites.iter().all(|call| {
                    let by_keyword = call.child_by_field_name("arguments").is_some_and(|args| {
                        named_children(args).iter().any(|a| {
                            a.kind() == "keyword_argument" && a.child_by_field_name("name").is_some_and(|k| param_names.contains(text(k)))
                        })
                    });
                    let on_self = call
                        .child_by_field_name("function")
                        .and_then(|f| f.child_by_field_name("object"))
                        .is_some_and(|o| o.kind() == "identifier" && text(o) == "self");
                    !by_keyword || (on_self && enclosing_class(*call).is_some_and(|c| c.id() == class.id()))
                });
                plain_base && unique && !dunder && method != "forward" && all_calls && !sites.is_empty() && !named_in_class_body && keywords_on_self
            } else {
                match scopes.symbol_at(name.byte_range()) {
                    Some(symbol) => {
                        let module_level = scopes.symbol(symbol).scope == 0;
                        let bindings = scopes.bindings_of(symbol).count();
                        let mut all_calls = true;
                        for o in scopes.occurrences_of(symbol).filter(|o| o.binding.is_none()) {
                            let node = module.root().descendant_for_byte_range(o.range.start, o.range.end);
                            match node.and_then(call_of) {
                                Some(call) if !has_dict_splat(call) => sites.push(call),
                                _ => all_calls = false,
                            }
                        }
                        let name = &scopes.symbol(symbol).name;
                        all_calls
                            && bindings == 1
                            && !(module_level && (ctx.protected.contains(name) || exported.contains(name)))
                    }
                    None => false,
                }
            };
            if !closed {
                continue;
            }
            let is_method = enclosing_class(f).is_some();
            let is_static = f.parent().filter(|p| p.kind() == "decorated_definition").is_some_and(|p| {
                named_children(p).into_iter().any(|d| d.kind() == "decorator" && text(d).contains("staticmethod"))
            });
            let mut by_name: HashMap<String, SymbolId> = HashMap::new();
            for (i, p) in params.iter().enumerate() {
                if is_method && !is_static && i == 0 {
                    continue;
                }
                open_parameters.insert(*p);
                by_name.insert(scopes.symbol(*p).name.clone(), *p);
            }
            for call in sites {
                let Some(args) = call.child_by_field_name("arguments") else { continue };
                for arg in named_children(args) {
                    if arg.kind() == "keyword_argument" {
                        if let Some(kw) = arg.child_by_field_name("name") {
                            if let Some(p) = by_name.get(text(kw)) {
                                keywords.push((kw.byte_range(), *p));
                            }
                        }
                    }
                }
            }
        }
        for c in module.nodes_of("class_definition") {
            if let Some(symbol) = c.child_by_field_name("name").and_then(|n| scopes.symbol_at(n.byte_range())) {
                kinds.insert(symbol, Kind::Class { module: classes.is_module(c) });
            }
        }

        let mut symbols = Vec::new();
        for (id, symbol) in scopes.symbols.iter().enumerate() {
            let name = symbol.name.as_str();
            if matches!(name, "self" | "cls" | "_") || (name.starts_with("__") && name.ends_with("__")) {
                continue;
            }
            let kind = scopes.scopes[symbol.scope].kind;
            if kind == ScopeKind::Class {
                continue;
            }
            if symbol.scope == 0 && (ctx.protected.contains(name) || exported.contains(name) || is_test_name(name)) {
                continue;
            }
            let bindings: Vec<_> = scopes.bindings_of(id).collect();
            if bindings.iter().any(|o| o.binding == Some(BindingKind::Import)) {
                continue;
            }
            if bindings.iter().any(|o| o.binding == Some(BindingKind::Param)) && (kind == ScopeKind::Lambda || !open_parameters.contains(&id)) {
                continue;
            }
            if bindings.is_empty() {
                continue;
            }
            symbols.push(id);
        }

        let (attributes, attribute_uses) = self_attributes(module, &classes);
        Plan { symbols, kinds, keywords, attributes, attribute_uses }
    }
}

/// The `self.X` attributes that can be renamed (with their first use), and every use.
/// Renamed attributes with their first use, and every use (the attribute name's range).
type AttributeRenames = (Vec<(String, usize)>, Vec<(std::ops::Range<usize>, String)>);

fn self_attributes(module: &Module, classes: &ClassInfo) -> AttributeRenames {
    let source = module.source;
    let text = |n: Node| &source[n.byte_range()];
    let mut getattr_strings: HashSet<String> = HashSet::new();
    let mut state_dict = false;
    for call in module.nodes_of("call") {
        let Some(func) = call.child_by_field_name("function") else { continue };
        if matches!(text(func), "getattr" | "setattr" | "hasattr" | "delattr") {
            descendants(call, &mut |n| {
                if n.kind() == "string_content" {
                    getattr_strings.insert(text(n).to_owned());
                }
            });
        }
    }
    let mut class_body_names: HashSet<String> = HashSet::new();
    for scope in &module.scopes.scopes {
        if scope.kind == ScopeKind::Class {
            class_body_names.extend(scope.symbols.keys().cloned());
        }
    }
    let mut uses: HashMap<String, Vec<Node>> = HashMap::new();
    for attr in module.nodes_of("attribute") {
        let Some(name) = attr.child_by_field_name("attribute") else { continue };
        if matches!(text(name), "state_dict" | "load_state_dict") {
            state_dict = true;
        }
        uses.entry(text(name).to_owned()).or_default().push(attr);
    }
    let mut renamed = Vec::new();
    let mut sites = Vec::new();
    let mut names: Vec<&String> = uses.keys().collect();
    names.sort();
    for name in names {
        let attrs = &uses[name];
        if name.starts_with("__") || MODULE_ATTRIBUTES.contains(&name.as_str()) || class_body_names.contains(name) || getattr_strings.contains(name) {
            continue;
        }
        let on_self = |a: &Node| a.child_by_field_name("object").is_some_and(|o| o.kind() == "identifier" && text(o) == "self");
        if !attrs.iter().all(on_self) {
            continue;
        }
        let assigned = attrs.iter().any(|a| is_assigned(*a));
        if !assigned {
            continue;
        }
        let classes_ok = attrs.iter().all(|a| match enclosing_class(*a) {
            Some(c) => classes.plain(c) && !(state_dict && classes.has_bases(c)),
            None => false,
        });
        if !classes_ok {
            continue;
        }
        let first = attrs.iter().map(|a| a.start_byte()).min().unwrap_or(0);
        renamed.push((name.clone(), first));
        for a in attrs {
            if let Some(id) = a.child_by_field_name("attribute") {
                sites.push((id.byte_range(), name.clone()));
            }
        }
    }
    (renamed, sites)
}

/// Is this attribute written (`self.x = ...`, `self.x += ...`, `for self.x in ...`)?
fn is_assigned(attr: Node) -> bool {
    let mut at = attr;
    while let Some(parent) = at.parent() {
        match parent.kind() {
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list" | "expression_list" | "parenthesized_expression" => at = parent,
            "assignment" | "augmented_assignment" => return parent.child_by_field_name("left").is_some_and(|l| l.id() == at.id()),
            "for_statement" => return parent.child_by_field_name("left").is_some_and(|l| l.id() == at.id()),
            _ => return false,
        }
    }
    false
}

/// The call whose callee is exactly `node`.
fn call_of(node: Node) -> Option<Node> {
    let parent = node.parent()?;
    (parent.kind() == "call" && parent.child_by_field_name("function").is_some_and(|f| f.id() == node.id())).then_some(parent)
}

fn has_dict_splat(call: Node) -> bool {
    call.child_by_field_name("arguments").is_some_and(|args| named_children(args).iter().any(|a| a.kind() == "dictionary_splat"))
}

/// The class whose body holds `node` directly (not through a nested function's class).
fn enclosing_class(node: Node) -> Option<Node> {
    let mut at = node.parent();
    while let Some(n) = at {
        if n.kind() == "class_definition" {
            return Some(n);
        }
        at = n.parent();
    }
    None
}

/// Which classes of the file derive only from `object`, `nn.Module` and such classes.
struct ClassInfo {
    plain: HashSet<usize>,
    with_bases: HashSet<usize>,
    modules: HashSet<usize>,
}

impl ClassInfo {
    fn new(module: &Module) -> ClassInfo {
        let source = module.source;
        let classes = module.nodes_of("class_definition");
        let by_name: HashMap<&str, Node> =
            classes.iter().filter_map(|c| Some((&source[c.child_by_field_name("name")?.byte_range()], *c))).collect();
        let bases_of = |c: &Node| -> Vec<String> {
            c.child_by_field_name("superclasses")
                .map(|s| named_children(s).into_iter().map(|b| source[b.byte_range()].to_owned()).collect())
                .unwrap_or_default()
        };
        let mut plain = HashSet::new();
        let mut modules = HashSet::new();
        let mut with_bases = HashSet::new();
        // A fixed point over local bases.
        let mut changed = true;
        while changed {
            changed = false;
            for c in &classes {
                let bases = bases_of(c);
                if !bases.is_empty() {
                    with_bases.insert(c.start_byte());
                }
                let ok = bases.iter().all(|b| {
                    matches!(b.as_str(), "object" | "nn.Module" | "torch.nn.Module" | "Module")
                        || by_name.get(b.as_str()).is_some_and(|base| plain.contains(&base.start_byte()))
                });
                let is_module = bases.iter().any(|b| {
                    b.ends_with("Module") || by_name.get(b.as_str()).is_some_and(|base| modules.contains(&base.start_byte()))
                });
                if ok && plain.insert(c.start_byte()) {
                    changed = true;
                }
                if is_module && modules.insert(c.start_byte()) {
                    changed = true;
                }
            }
        }
        ClassInfo { plain, with_bases, modules }
    }
    fn plain(&self, class: Node) -> bool {
        self.plain.contains(&class.start_byte())
    }
    fn has_bases(&self, class: Node) -> bool {
        self.with_bases.contains(&class.start_byte())
    }
    fn is_module(&self, class: Node) -> bool {
        self.modules.contains(&class.start_byte())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn neutral_of(source: &str) -> String {
        neutral(source, &Context::default()).map_or("None".to_owned(), |r| r.text)
    }
    fn misleading_of(source: &str) -> String {
        misleading(source, &Context::default()).map_or("None".to_owned(), |r| r.text)
    }

    const PROGRAM: &str = r#"import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


def evaluate(model, loader):
    model.eval()
    for x, y in loader:
        out = model(x)
        print(out.sum().item(), y)


def train(model, loader, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


net = Net()
evaluate(model=net, loader=[(torch.ones(4), 1)])
train(net, [], torch.optim.SGD(net.parameters(), lr=0.1))
"#;

    #[test]
    fn neutral_names_rename_bindings_parameters_keywords_and_self_attributes() {
        expect![[r#"
            import torch
            from torch import nn


            class C1(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a2 = nn.Linear(4, 2)

                def forward(self, x):
                    return self.a2(x)


            def f3(v4, v5):
                v4.eval()
                for v6, v7 in v5:
                    v8 = v4(v6)
                    print(v8.sum().item(), v7)


            def f9(v10, v11, v12):
                for v13, v14 in v11:
                    v15 = torch.nn.functional.mse_loss(v10(v13), v14)
                    v15.backward()
                    v12.step()


            v16 = C1()
            f3(v4=v16, v5=[(torch.ones(4), 1)])
            f9(v16, [], torch.optim.SGD(v16.parameters(), lr=0.1))
        "#]]
        .assert_eq(&neutral_of(PROGRAM));
    }

    #[test]
    fn misleading_names_say_the_opposite_role() {
        expect![[r#"
            import torch
            from torch import nn


            class Dataset(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.val_loader = nn.Linear(4, 2)

                def forward(self, x):
                    return self.val_loader(x)


            def train_step(loader, model):
                loader.eval()
                for net, encoder in model:
                    loss = loader(net)
                    print(loss.sum().item(), encoder)


            def evaluate(batch, generator, model2):
                for classifier, model3 in generator:
                    preds = torch.nn.functional.mse_loss(batch(classifier), model3)
                    preds.backward()
                    model2.step()


            images = Dataset()
            train_step(loader=images, model=[(torch.ones(4), 1)])
            evaluate(images, [], torch.optim.SGD(images.parameters(), lr=0.1))
        "#]]
        .assert_eq(&misleading_of(PROGRAM));
    }

    #[test]
    fn parameters_of_functions_passed_as_values_or_called_with_splats_are_kept() {
        let source = "def step(model, x):\n    return model(x)\n\ndef run(m, xs, kw):\n    list(map(step, xs))\n    step(**kw)\n";
        expect![[r#"
            def f1(model, x):
                return model(x)

            def f2(v3, v4, v5):
                list(map(f1, v4))
                f1(**v5)
        "#]]
        .assert_eq(&neutral_of(source));
    }

    #[test]
    fn imports_builtins_external_keywords_and_foreign_attributes_are_kept() {
        let source = "import torch as th\nfrom x import load\n\ndef f(model, path):\n    state = load(path, map_location='cpu')\n    model.net = th.zeros(1)\n    print(len(state), model.net)\n";
        expect![[r#"
            import torch as th
            from x import load

            def f1(v2, v3):
                v4 = load(v3, map_location='cpu')
                v2.net = th.zeros(1)
                print(len(v4), v2.net)
        "#]]
        .assert_eq(&neutral_of(source));
    }

    #[test]
    fn files_that_reach_names_by_spelling_are_not_renamed() {
        assert_eq!(neutral_of("def f(x):\n    return eval('x')\n"), "None");
        assert_eq!(neutral_of("class A:\n    __slots__ = ('x',)\n    def f(self):\n        self.x = 1\n"), "None");
    }

    #[test]
    fn protected_and_exported_names_are_kept() {
        let ctx = Context { protected: ["build".to_owned()].into_iter().collect(), ..Context::default() };
        let source = "__all__ = ['Net']\nclass Net:\n    pass\ndef build():\n    return Net()\ndef other():\n    return build()\n";
        expect![[r#"
            __all__ = ['Net']
            class Net:
                pass
            def build():
                return Net()
            def f1():
                return build()
        "#]]
        .assert_eq(&neutral(source, &ctx).unwrap().text);
    }

    #[test]
    fn method_parameters_are_renamed_with_the_keywords_of_their_calls() {
        let source = "class Trainer:\n    def evaluate(self, model, loader):\n        return model(loader)\n\n    def run(self, m, l):\n        return self.evaluate(model=m, loader=l)\n\n    def step(self, closure=None):\n        return closure\n\nTrainer().run(1, 2)\nTrainer().step()\noptimizer.step(closure=None)\n";
        expect![[r#"
            class C1:
                def evaluate(self, v2, v3):
                    return v2(v3)

                def run(self, v4, v5):
                    return self.evaluate(v2=v4, v3=v5)

                def step(self, closure=None):
                    return closure

            C1().run(1, 2)
            C1().step()
            optimizer.step(closure=None)
        "#]]
        .assert_eq(&neutral_of(source));
    }

    #[test]
    fn roles_come_from_the_words_of_a_name() {
        assert_eq!(role_of("val_loader"), "data");
        assert_eq!(role_of("netG"), "network");
        assert_eq!(role_of("train_loss"), "loss");
        assert_eq!(role_of("y_pred"), "output");
        assert_eq!(role_of("counter"), "other");
    }
}
