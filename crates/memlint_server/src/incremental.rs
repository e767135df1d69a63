//! A fast first answer after an edit inside one top-level statement: the findings of the
//! last complete lint outside that statement, moved by the edit's length, and the findings
//! inside it from a lint of the module with every unrelated statement left out.
//!
//! Why it is only a first answer: the semantic model reads across definitions (the callers
//! of a function decide whether its forward pass runs under `no_grad`; a backward pass
//! anywhere in a scope makes its names tensors with history). The prediction keeps the
//! statements the edited one uses or is used by, name by name as Python resolves names
//! at module level, and gives up where it can see a dependency (a finding outside the
//! statement whose evidence or fix lies in it, a changed definition header, a statement
//! that binds other names than before, an edited import or comment, a line added or
//! removed) or where it would save little (less than a quarter of the file left out). What
//! it cannot see, the complete lint that always follows it corrects (see
//! `Server::schedule`), so the findings a client ends up with are exactly those of a
//! complete lint. `examples/predict_edits.rs` measures how often the first answer is
//! already exact.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ops::Range;

use memlint_linter::Diagnostic;
use memlint_python::tree_sitter::{Node, Tree};

/// The last complete lint of a document: the text and tree it read and what it found.
pub struct Baseline {
    pub text: String,
    pub tree: Tree,
    pub diagnostics: Vec<Diagnostic>,
    /// The settings generation it was linted under.
    pub generation: u64,
}

/// A top-level statement (or a method, in a class) in which every changed byte lies, in
/// the old text and in the new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditedStatement {
    /// Its bytes in the old text.
    pub old: Range<usize>,
    /// Its bytes in the new text (the same start).
    pub new: Range<usize>,
}

impl EditedStatement {
    fn delta(&self) -> isize {
        self.new.end as isize - self.old.end as isize
    }
}

/// The one top-level statement that holds every byte in which `old_text` and `new_text`
/// differ: a definition (function, class, decorated either) whose body holds them, with
/// its header (decorators, name, parameters, bases) unchanged, or in a class the one
/// method whose body holds them, with its header unchanged; or any other statement that
/// binds the same names as before (not an import, which changes what names mean
/// everywhere, nor a comment, which may hold a `noqa` for another line). `None` when the
/// texts differ anywhere else, or not at all.
pub fn edited_statement(old_text: &str, old_tree: &Tree, new_text: &str, new_tree: &Tree) -> Option<EditedStatement> {
    let (old, new) = (old_text.as_bytes(), new_text.as_bytes());
    let prefix = common_prefix(old, new);
    let room = old.len().min(new.len()) - prefix;
    let suffix = common_suffix(&old[prefix..], &new[prefix..]).min(room);
    if prefix == old.len() && prefix == new.len() {
        return None;
    }
    let old_changed = prefix..old.len() - suffix;
    let new_changed = prefix..new.len() - suffix;
    let old_statement = top_level_statement_around(old_tree.root_node(), &old_changed)?;
    let new_statement = top_level_statement_around(new_tree.root_node(), &new_changed)?;
    // The statement's end moves by exactly the edit's length: nothing after it changed.
    let same_tail = old.len() - old_statement.end_byte() == new.len() - new_statement.end_byte();
    // Messages and facts name lines (`after model.eval() (line 16)`): an edit that adds or
    // removes a line would leave those of the findings after it wrong.
    let same_lines = old[old_changed.clone()].iter().filter(|b| **b == b'\n').count()
        == new[new_changed.clone()].iter().filter(|b| **b == b'\n').count();
    if !(same_tail && same_lines && old_statement.start_byte() == new_statement.start_byte() && old_statement.kind() == new_statement.kind()) {
        return None;
    }
    if !DEFINITIONS.contains(&old_statement.kind()) {
        let unfollowed = ["import_statement", "import_from_statement", "future_import_statement", "comment"];
        let binds = |statement: Node<'_>, text: &str| {
            let mut names: Vec<String> = Bound::of(statement, text).names.into_iter().map(str::to_owned).collect();
            names.sort();
            names
        };
        return (!unfollowed.contains(&old_statement.kind()) && binds(old_statement, old_text) == binds(new_statement, new_text))
            .then(|| EditedStatement { old: old_statement.byte_range(), new: new_statement.byte_range() });
    }
    let (old_def, new_def) = (old_statement, new_statement);
    let (old_body, new_body) = (body_start(old_def)?, body_start(new_def)?);
    let same_header = old_text[old_def.start_byte()..old_body] == new_text[new_def.start_byte()..new_body];
    if !(same_header && prefix >= old_body && prefix >= new_body) {
        return None;
    }
    let method = (|| {
        let (old_method, new_method) = (member_around(old_def, &old_changed)?, member_around(new_def, &new_changed)?);
        let (old_body, new_body) = (body_start(old_method)?, body_start(new_method)?);
        (old_method.start_byte() == new_method.start_byte()
            && old_method.kind() == new_method.kind()
            && old_text[old_method.start_byte()..old_body] == new_text[new_method.start_byte()..new_body]
            && prefix >= old_body
            && prefix >= new_body)
            .then(|| EditedStatement { old: old_method.byte_range(), new: new_method.byte_range() })
    })();
    Some(method.unwrap_or(EditedStatement { old: old_def.byte_range(), new: new_def.byte_range() }))
}

/// The definition among a class's statements whose bytes hold `changed`.
fn member_around<'t>(class: Node<'t>, changed: &Range<usize>) -> Option<Node<'t>> {
    let body = class_body(class)?;
    let mut cursor = body.walk();
    let found = body.named_children(&mut cursor).find(|s| s.start_byte() <= changed.start && changed.end <= s.end_byte());
    found.filter(|s| DEFINITIONS.contains(&s.kind()))
}

/// The body of a class definition (decorated or not).
fn class_body(definition: Node<'_>) -> Option<Node<'_>> {
    let definition = undecorated(definition)?;
    (definition.kind() == "class_definition").then(|| definition.child_by_field_name("body")).flatten()
}

/// The function or class a (decorated) definition defines.
fn undecorated(definition: Node<'_>) -> Option<Node<'_>> {
    match definition.kind() {
        "decorated_definition" => definition.child_by_field_name("definition"),
        _ => Some(definition),
    }
}

const DEFINITIONS: &[&str] = &["function_definition", "class_definition", "decorated_definition"];

/// How many bytes `a` and `b` start with in common: compared a block at a time (`memcmp`),
/// then byte by byte in the first block that differs.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n].iter().zip(&b[at..n]).take_while(|(x, y)| x == y).count()
}

/// How many bytes `a` and `b` end with in common.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut at = n;
    while at >= BLOCK && a[at - BLOCK..at] == b[at - BLOCK..at] {
        at -= BLOCK;
    }
    n - at + a[..at].iter().rev().zip(b[..at].iter().rev()).take_while(|(x, y)| x == y).count()
}

/// The top-level statement whose bytes hold `changed` (an empty range: a point inside it).
fn top_level_statement_around<'t>(root: Node<'t>, changed: &Range<usize>) -> Option<Node<'t>> {
    // The first statement that ends after the change's start (a search down tree-sitter's
    // balanced tree of the module's children, not a walk along them), or the one before it:
    // a change at a statement's very end (a letter typed at the end of its last line).
    let found = match root.first_named_child_for_byte(changed.start) {
        Some(after) if after.start_byte() <= changed.start => Some(after),
        Some(after) => after.prev_named_sibling(),
        None => root.named_child(root.named_child_count().checked_sub(1)?),
    }?;
    (found.start_byte() <= changed.start && changed.end <= found.end_byte()).then_some(found)
}

/// Does no top-level statement of `root` but `statement` hold a syntax error?
fn errors_only_in(root: Node<'_>, statement: Node<'_>) -> bool {
    let mut cursor = root.walk();
    let clean = root.children(&mut cursor).all(|s| s.id() == statement.id() || !s.has_error());
    clean
}

/// Where the body of a definition starts (after a decorated definition's decorators).
fn body_start(definition: Node<'_>) -> Option<usize> {
    Some(undecorated(definition)?.child_by_field_name("body")?.start_byte())
}

/// The name a top-level definition binds.
fn definition_name<'s>(definition: Node<'_>, text: &'s str) -> Option<&'s str> {
    Some(&text[undecorated(definition)?.child_by_field_name("name")?.byte_range()])
}

const IMPORTS: &[&str] = &["import_statement", "import_from_statement"];

/// `text` with the top-level statements unrelated to `edited` left out (their line breaks
/// kept, see [`Excerpt`]).
///
/// Kept: the edited statement, every import (a fix may add one where there is none; of
/// imports written alike, the last) and top-level comment, and, until nothing changes,
/// what kept code is tied to by name, as the semantic model resolves a name at module
/// level: a use in a function body to the name's last binding in the module, any other use
/// to the last one before its statement, and any use to the last one too (the model knows
/// a class by its last definition). So a statement is tied to the bindings its names
/// resolve to, and the edited statement to the statements whose names resolve to what it
/// binds: its callers, whose `no_grad` can decide its findings, and theirs in turn (not the
/// other callers of what kept code calls). A mention of an attribute of `self` in the
/// edited statement or those users ties the statements of its class hierarchy that assign
/// it, or every statement that does where the hierarchy assigns none (as the model knows
/// `self.model`), and every statement with a use that tells what it is (`self.model.eval()`,
/// `self.opt.step()`: evidence the model takes from anywhere in the module). An edited
/// class's `__init__` stands for the class's name (calling the class calls it). In copies
/// of one script, an edit in one copy's function or method keeps only what resolves to it.
///
/// `None` when less than a quarter of the text would be left out: the prediction would cost
/// about what the complete lint costs, which then runs anyway.
pub fn leave_out_unrelated(text: &str, tree: &Tree, edited: &Range<usize>) -> Option<Excerpt> {
    let root = tree.root_node();
    let mut cursor = root.walk();
    let mut statements: Vec<Node<'_>> = root.named_children(&mut cursor).collect();
    // A method: its class's statements take the class's place (the class's header stays),
    // and what makes the class what it is stays with them.
    let mut class_core = Vec::new();
    // The edited method's class and where its members lie among `statements`.
    let mut edited_class: Option<(Node<'_>, Range<usize>)> = None;
    if !statements.iter().any(|s| s.byte_range() == *edited) {
        let class = statements.iter().position(|s| s.start_byte() <= edited.start && edited.end <= s.end_byte());
        if let Some((i, body)) = class.and_then(|i| Some((i, class_body(statements[i])?))) {
            let mut cursor = body.walk();
            let members: Vec<Node<'_>> = body.named_children(&mut cursor).collect();
            class_core = (i..i + members.len())
                .filter(|j| !DEFINITIONS.contains(&members[j - i].kind()) || {
                    let name = definition_name(members[j - i], text);
                    matches!(name, Some("__init__" | "forward" | "__call__"))
                })
                .collect();
            edited_class = undecorated(statements[i]).map(|c| (c, i..i + members.len()));
            statements.splice(i..i + 1, members);
        }
    }
    let edited_at = statements.iter().position(|s| s.byte_range() == *edited);
    // What each definition binds by its name. The edited class's `__init__` is called by
    // calling the class (`ConvNet()`, as the model finds its callers): it stands for the
    // class's name, whose header is no statement here.
    let class_name = edited_class.as_ref().and_then(|(c, _)| Some(&text[c.child_by_field_name("name")?.byte_range()]));
    let names: Vec<Option<&str>> = statements
        .iter()
        .enumerate()
        .map(|(i, s)| match DEFINITIONS.contains(&s.kind()).then(|| definition_name(*s, text)).flatten() {
            Some("__init__") if edited_class.as_ref().is_some_and(|(_, members)| members.contains(&i)) => class_name,
            name => name,
        })
        .collect();
    // What each statement binds: a definition its name, any other statement its targets.
    let mut binds: Vec<Vec<&str>> = Vec::with_capacity(statements.len());
    // The statements that bind each name, in order.
    let mut binders: HashMap<&str, Vec<usize>> = HashMap::default();
    for (i, s) in statements.iter().enumerate() {
        let mut bound = match names[i] {
            Some(name) => vec![name],
            None if IMPORTS.contains(&s.kind()) => memlint_python::import_bindings(*s, text).into_iter().map(|(local, _)| local).collect(),
            None if !DEFINITIONS.contains(&s.kind()) => Bound::of(*s, text).names,
            None => Vec::new(),
        };
        bound.sort_unstable();
        bound.dedup();
        for name in &bound {
            binders.entry(name).or_default().push(i);
        }
        binds.push(bound);
    }
    // The binding of `name` a use in statement `at` sees, at module level.
    let last = |name: &str| binders.get(name).and_then(|b| b.last().copied());
    let last_before = |name: &str, at: usize| {
        let b = binders.get(name)?;
        b[..b.partition_point(|i| *i < at)].last().copied()
    };
    let mut uses: Vec<Option<Uses<'_>>> = vec![None; statements.len()];
    let mut uses_of = |i: usize| uses[i].get_or_insert_with(|| Uses::of(statements[i], text)).clone();
    // Past this many bytes kept, less than a quarter of the text could be left out.
    let most = text.len() - text.len() / 4;
    let mut kept_bytes = 0;
    let mut kept = vec![false; statements.len()];
    for (i, s) in statements.iter().enumerate() {
        if s.kind() == "comment" {
            kept[i] = true;
            kept_bytes += s.byte_range().len();
        }
    }
    // Of imports written alike (copies of a script), the last is the one the model looks a
    // name up by; the others are kept where a statement's name resolves to them.
    let mut last_of_its_text: HashMap<&str, usize> = HashMap::default();
    for (i, s) in statements.iter().enumerate() {
        if IMPORTS.contains(&s.kind()) {
            last_of_its_text.insert(&text[s.byte_range()], i);
        }
    }
    // Each statement queued with whether its users are to be kept too: those of the edited
    // statement and, in turn, of its users (callers of callers can decide a forward
    // pass's `no_grad`), not those of what kept code calls (its other callers do not
    // change what the edited statement finds).
    let mut queue: Vec<(usize, bool)> = statements
        .iter()
        .enumerate()
        .filter(|(i, s)| s.kind() == "future_import_statement" || IMPORTS.contains(&s.kind()) && last_of_its_text[&text[s.byte_range()]] == *i)
        .map(|(i, _)| (i, false))
        .chain(class_core.into_iter().map(|i| (i, false)))
        .chain(edited_at.map(|i| (i, true)))
        .collect();
    let mut users_kept = vec![false; statements.len()];
    // Which statements assign each attribute of `self`, and the module's classes: built at
    // the first mention of one.
    let mut attribute_setters: HashMap<&str, Vec<usize>> = HashMap::default();
    let mut attribute_uses: HashMap<&str, Vec<usize>> = HashMap::default();
    // What each statement asked about assigns to attributes of `self`.
    let mut assigned: HashMap<usize, AssignedAttributes<'_>> = HashMap::default();
    let mut classes: Option<Classes<'_>> = None;
    let starts: Vec<usize> = statements.iter().map(|s| s.start_byte()).collect();
    while let Some((x, with_users)) = queue.pop() {
        if !std::mem::replace(&mut kept[x], true) {
            kept_bytes += statements[x].byte_range().len();
            if kept_bytes > most {
                return None;
            }
            // What its names resolve to (an import uses none).
            let used = if IMPORTS.contains(&statements[x].kind()) { Uses::default() } else { uses_of(x) };
            let mut resolved = Vec::new();
            for name in &used.now {
                resolved.extend(last_before(name, x).into_iter().chain(last(name)));
            }
            for name in &used.later {
                resolved.extend(last(name));
                if last(name) == Some(x) {
                    resolved.extend(last_before(name, x));
                }
            }
            queue.extend(resolved.into_iter().filter(|y| !kept[*y]).map(|y| (y, false)));
        }
        if !with_users || std::mem::replace(&mut users_kept[x], true) {
            continue;
        }
        // The model knows `self.model` in a method by the values the methods of its class
        // hierarchy assign to it, or, where they assign none, by those any class's methods
        // do (`SemanticModel::self_attribute_values`): followed for the edited statement and
        // its users (what kept code calls is summarized by what it names, as above; following
        // its attributes too would keep every copy of a class in a file of copies of one
        // script).
        let mut attributes = self_attributes(&text[statements[x].byte_range()]).peekable();
        if attributes.peek().is_some() {
            let classes = classes.get_or_insert_with(|| Classes::of(&statements, text, edited_class.clone()));
            let hierarchy = classes.hierarchy_of(x);
            for attribute in attributes {
                let mut sets = |statement: usize, in_a_method: bool| {
                    let assigned = assigned.entry(statement).or_insert_with(|| AssignedAttributes::of(statements[statement], text));
                    if in_a_method { assigned.in_methods.contains(&attribute) } else { assigned.anywhere.contains(&attribute) }
                };
                let own = hierarchy.as_ref().filter(|h| h.iter().any(|s| sets(*s, true)));
                let tied: Vec<usize> = match own {
                    Some(hierarchy) => hierarchy.iter().copied().filter(|s| sets(*s, false)).collect(),
                    // The statements that assign it anywhere: among those that name
                    // `self.<attribute>` (one search of the text), those with an assignment,
                    // `for` or `with` target of it.
                    None => attribute_setters
                        .entry(attribute)
                        .or_insert_with(|| statements_mentioning_self_attribute(text, &starts, attribute).into_iter().filter(|s| sets(*s, false)).collect())
                        .clone(),
                };
                // And, as the model takes `self.x.eval()` or `self.x.step()` anywhere in the
                // module for evidence of what `self.x` is, the statements with such a use.
                let used = attribute_uses.entry(attribute).or_insert_with(|| {
                    let uses = |statement: &usize| {
                        let statement = statement_text(text, &starts, *statement);
                        memlint_python::MODULE_ONLY_METHODS
                            .iter()
                            .chain(&["zero_grad", "step", "param_groups"])
                            .any(|method| statement.contains(&format!("self.{attribute}.{method}")))
                    };
                    statements_mentioning_self_attribute(text, &starts, attribute).into_iter().filter(uses).collect()
                });
                queue.extend(tied.into_iter().chain(used.iter().copied()).filter(|y| !kept[*y]).map(|y| (y, false)));
            }
        }
        // The statements whose names resolve to what it binds.
        for name in &binds[x] {
            for y in statements_mentioning(text, &starts, name) {
                // Only a statement after which `x` still binds the name, or for which `x`
                // is the last binding before it, can see it (asked first: taking a
                // statement's words apart costs more).
                if users_kept[y] || y == x || last(name) != Some(x) && last_before(name, y) != Some(x) {
                    continue;
                }
                let used = uses_of(y);
                let sees_x = (used.now.contains(name) || used.later.contains(name)) && last(name) == Some(x)
                    || used.now.contains(name) && last_before(name, y) == Some(x)
                    || used.later.contains(name) && last(name) == Some(y) && last_before(name, y) == Some(x);
                if sees_x {
                    queue.push((y, true));
                }
            }
        }
    }
    let left_out: Vec<Range<usize>> = statements.iter().zip(&kept).filter(|(_, k)| !**k).map(|(s, _)| s.byte_range()).collect();
    Some(Excerpt::leaving_out(text, &left_out))
}

/// The module's top-level classes as the prediction sees them, to mirror the model's class
/// hierarchies: a class is known by its last definition of a name, and derives from the
/// classes its bases' words name.
struct Classes<'s> {
    /// Each class's name, and the names of the classes of the module its bases mention.
    classes: Vec<(&'s str, Vec<&'s str>)>,
    /// Each statement's class (the edited class's members lie among the statements).
    class_of: Vec<Option<usize>>,
}

impl<'s> Classes<'s> {
    fn of(statements: &[Node<'_>], text: &'s str, edited_class: Option<(Node<'_>, Range<usize>)>) -> Classes<'s> {
        let mut definitions = Vec::new();
        let mut class_of = vec![None; statements.len()];
        for (i, s) in statements.iter().enumerate() {
            if let Some(class) = undecorated(*s).filter(|c| c.kind() == "class_definition") {
                class_of[i] = Some(definitions.len());
                definitions.push(class);
            }
        }
        if let Some((class, members)) = edited_class {
            for i in members {
                class_of[i] = Some(definitions.len());
            }
            definitions.push(class);
        }
        let name = |c: Node<'_>| c.child_by_field_name("name").map_or("", |n| &text[n.byte_range()]);
        let names: HashSet<&str> = definitions.iter().map(|c| name(*c)).collect();
        let classes = definitions
            .iter()
            .map(|c| {
                let bases = c.child_by_field_name("superclasses").map_or("", |b| &text[b.byte_range()]);
                (name(*c), bases.split(|c: char| !is_name(c)).filter(|w| names.contains(w)).collect())
            })
            .collect();
        Classes { classes, class_of }
    }

    /// The statements of the class of statement `at` and of the classes in its hierarchy
    /// (`SemanticModel::same_hierarchy`): itself, and those of another name from which it
    /// derives or which derive from it. `None` when `at` is no class's.
    fn hierarchy_of(&self, at: usize) -> Option<Vec<usize>> {
        let class = self.class_of[at]?;
        let name = self.classes[class].0;
        let related: Vec<bool> = (0..self.classes.len())
            .map(|c| c == class || self.classes[c].0 != name && (self.derives(name, self.classes[c].0) || self.derives(self.classes[c].0, name)))
            .collect();
        Some((0..self.class_of.len()).filter(|s| self.class_of[*s].is_some_and(|c| related[c])).collect())
    }

    /// Does the class named `class` (its last definition) derive from the one named `base`?
    fn derives(&self, class: &'s str, base: &str) -> bool {
        memlint_python::derives_by_name(class, base, |c| self.classes.iter().rev().find(|(name, _)| *name == c).map(|(_, bases)| bases.clone()).unwrap_or_default())
    }
}

/// The attributes of `self` a statement (a method, a class, any other) assigns.
struct AssignedAttributes<'s> {
    /// As the model records them (`SemanticModel::self_attribute_values`): assignments of a
    /// value in a method's own body, not in a nested definition.
    in_methods: Vec<&'s str>,
    /// Assignments, `for` and `with` targets anywhere in it ([`assigned_self_attributes`]).
    anywhere: Vec<&'s str>,
}

impl<'s> AssignedAttributes<'s> {
    fn of(statement: Node<'_>, text: &'s str) -> AssignedAttributes<'s> {
        fn walk<'s>(node: Node<'_>, text: &'s str, out: &mut Vec<&'s str>) {
            if matches!(node.kind(), "function_definition" | "class_definition" | "lambda") {
                return;
            }
            if node.kind() == "assignment" && node.child_by_field_name("right").is_some() {
                for leaf in node.child_by_field_name("left").map(memlint_python::target_leaves).unwrap_or_default() {
                    if leaf.kind() == "attribute" && leaf.child_by_field_name("object").is_some_and(|o| &text[o.byte_range()] == "self") {
                        out.extend(leaf.child_by_field_name("attribute").map(|a| &text[a.byte_range()]));
                    }
                }
            }
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                walk(child, text, out);
            }
        }
        fn method_body(definition: Node<'_>) -> Option<Node<'_>> {
            undecorated(definition).filter(|f| f.kind() == "function_definition").and_then(|f| f.child_by_field_name("body"))
        }
        let mut in_methods = Vec::new();
        match undecorated(statement).map(|s| s.kind()) {
            Some("class_definition") => {
                if let Some(body) = class_body(statement) {
                    let mut cursor = body.walk();
                    for method in body.named_children(&mut cursor).filter_map(method_body) {
                        walk(method, text, &mut in_methods);
                    }
                }
            }
            _ => {
                if let Some(body) = method_body(statement) {
                    walk(body, text, &mut in_methods);
                }
            }
        }
        let mut anywhere = Vec::new();
        assigned_self_attributes(statement, text, &mut anywhere);
        AssignedAttributes { in_methods, anywhere }
    }
}

/// Can `c` be part of a Python name (the words [`words`] splits a text into)?
fn is_name(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The statements (by index; `starts` holds where each begins, in order) whose text has
/// `name` as a whole word: one search of the whole text (a word between statements, in a
/// comment, falls to the statement before it, which is harmless: it is only a candidate).
fn statements_mentioning(text: &str, starts: &[usize], name: &str) -> Vec<usize> {
    let mut found: Vec<usize> = text
        .match_indices(name)
        .filter(|(at, _)| !text[..*at].chars().next_back().is_some_and(is_name) && !text[at + name.len()..].chars().next().is_some_and(is_name))
        .filter_map(|(at, _)| starts.partition_point(|s| *s <= at).checked_sub(1))
        .collect();
    found.dedup();
    found
}

/// The text of statement `i` (`starts` holds where each begins), up to the next one's start.
fn statement_text<'s>(text: &'s str, starts: &[usize], i: usize) -> &'s str {
    &text[starts[i]..starts.get(i + 1).copied().unwrap_or(text.len())]
}

/// The statements (by index, as in [`statements_mentioning`]) whose text names
/// `self.<attribute>`.
fn statements_mentioning_self_attribute(text: &str, starts: &[usize], attribute: &str) -> Vec<usize> {
    let mut found: Vec<usize> = statements_mentioning(text, starts, attribute)
        .into_iter()
        .filter(|i| {
            self_attributes(statement_text(text, starts, *i)).any(|a| a == attribute)
        })
        .collect();
    found.dedup();
    found
}

/// The attributes of `self` that `text` names (`self.model`, `self.model.eval()`).
fn self_attributes(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("self.").filter_map(move |(at, _)| {
        if text[..at].chars().next_back().is_some_and(is_name) {
            return None;
        }
        let rest = &text[at + 5..];
        let end = rest.find(|c: char| !is_name(c)).unwrap_or(rest.len());
        (end > 0).then(|| &rest[..end])
    })
}

/// The attributes of `self` that assignments, `for` and `with` targets anywhere in `node`
/// (in its nested definitions too) bind.
fn assigned_self_attributes<'s>(node: Node<'_>, text: &'s str, out: &mut Vec<&'s str>) {
    let target = match node.kind() {
        "assignment" | "augmented_assignment" | "for_statement" => node.child_by_field_name("left"),
        "as_pattern_target" => Some(node),
        _ => None,
    };
    for leaf in target.map(memlint_python::target_leaves).unwrap_or_default() {
        if leaf.kind() == "attribute" && leaf.child_by_field_name("object").is_some_and(|o| &text[o.byte_range()] == "self") {
            out.extend(leaf.child_by_field_name("attribute").map(|a| &text[a.byte_range()]));
        }
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        assigned_self_attributes(child, text, out);
    }
}

/// The names a statement uses, as words of its text: those in the bodies of the functions
/// it defines run later (they see a name's last binding in the module), the others where
/// the statement runs. The name a definition binds is not a use of it.
#[derive(Clone, Default)]
struct Uses<'s> {
    now: HashSet<&'s str>,
    later: HashSet<&'s str>,
}

impl<'s> Uses<'s> {
    fn of(statement: Node<'_>, text: &'s str) -> Uses<'s> {
        let mut parts = Vec::new();
        definition_parts(statement, &mut parts);
        let mut uses = Uses::default();
        let mut from = statement.start_byte();
        for (range, is_body) in parts {
            uses.now.extend(words(&text[from..range.start]));
            if is_body {
                uses.later.extend(words(&text[range.clone()]));
            }
            from = range.end;
        }
        uses.now.extend(words(&text[from..statement.end_byte()]));
        uses
    }
}

/// In `node`, in order: the name of each function and class it defines (`false`) and the
/// body of each function (`true`), not looking inside those bodies.
fn definition_parts(node: Node<'_>, out: &mut Vec<(Range<usize>, bool)>) {
    if matches!(node.kind(), "function_definition" | "class_definition") {
        out.extend(node.child_by_field_name("name").map(|n| (n.byte_range(), false)));
    }
    if node.kind() == "function_definition" {
        out.extend(node.child_by_field_name("body").map(|b| (b.byte_range(), true)));
        return;
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        definition_parts(child, out);
    }
}

/// A text with some statements left out but their line breaks kept: every line keeps its
/// number (messages and facts name lines) and a kept line its columns; `to_original` moves
/// an offset back. Left out, not blanked with spaces: tree-sitter lexes a line of spaces at
/// about the cost of code.
#[derive(Debug)]
pub struct Excerpt {
    pub text: String,
    /// Where the excerpt's offsets start to lie this many bytes before the original's.
    shifts: Vec<(usize, usize)>,
}

impl Excerpt {
    /// `text` without the bytes of `left_out` (sorted, disjoint) other than line breaks.
    pub fn leaving_out(text: &str, left_out: &[Range<usize>]) -> Excerpt {
        let mut out = String::with_capacity(text.len());
        let mut shifts = vec![(0, 0)];
        let (mut copied_to, mut removed) = (0, 0);
        for range in left_out {
            out.push_str(&text[copied_to..range.start]);
            let breaks: String = text[range.clone()].chars().filter(|c| *c == '\n' || *c == '\r').collect();
            out.push_str(&breaks);
            removed += range.len() - breaks.len();
            shifts.push((out.len(), removed));
            copied_to = range.end;
        }
        out.push_str(&text[copied_to..]);
        Excerpt { text: out, shifts }
    }

    /// The original offset of the excerpt's `offset`.
    pub fn to_original(&self, offset: usize) -> usize {
        let i = self.shifts.partition_point(|(at, _)| *at <= offset);
        offset + self.shifts[i.saturating_sub(1)].1
    }

    /// `d` with every place in it (its range, its facts', its fix edits') moved back.
    fn finding_to_original(&self, mut d: Diagnostic) -> Diagnostic {
        let back = |r: &mut Range<usize>| *r = self.to_original(r.start)..self.to_original(r.end);
        back(&mut d.range);
        for fact in &mut d.evidence {
            if let Some(r) = &mut fact.range {
                back(r);
            }
        }
        if let Some(fix) = &mut d.fix {
            for e in &mut fix.edits {
                back(&mut e.range);
            }
        }
        d
    }
}

/// What `node` binds where it runs, as the semantic model's binder takes targets apart
/// ([`memlint_python::target_leaves`]): the names its assignment, `for` and `with` targets
/// and nested definitions bind (not what those definitions' bodies bind).
#[derive(Default)]
struct Bound<'s> {
    names: Vec<&'s str>,
}

impl<'s> Bound<'s> {
    fn of(node: Node<'_>, text: &'s str) -> Bound<'s> {
        let mut bound = Bound::default();
        bound.walk(node, text);
        bound
    }

    fn walk(&mut self, node: Node<'_>, text: &'s str) {
        let target = match node.kind() {
            "function_definition" | "class_definition" => {
                self.names.extend(node.child_by_field_name("name").map(|n| &text[n.byte_range()]));
                return;
            }
            "assignment" | "augmented_assignment" | "for_statement" => node.child_by_field_name("left"),
            "as_pattern_target" => Some(node),
            _ => None,
        };
        for leaf in target.map(memlint_python::target_leaves).unwrap_or_default() {
            if leaf.kind() == "identifier" {
                self.names.push(&text[leaf.byte_range()]);
            }
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.walk(child, text);
        }
    }
}

/// The names of `text`, without Python's keywords and `self`/`cls` (which tie nothing).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_name(c)).filter(|w| !w.is_empty() && !matches!(*w, "self" | "cls") && !memlint_python::KEYWORDS.contains(w))
}

/// Does `range` touch `span` (an empty range at a point inside it counts)?
fn touches(range: &Range<usize>, span: &Range<usize>) -> bool {
    range.start < span.end && range.end > span.start || (range.is_empty() && span.contains(&range.start))
}

fn shift(range: &mut Range<usize>, from: usize, delta: isize) {
    if range.start >= from {
        range.start = range.start.wrapping_add_signed(delta);
        range.end = range.end.wrapping_add_signed(delta);
    }
}

/// The baseline's findings outside the edited definition, moved to the new text; `None`
/// when one of them rests on something inside it (a fact or a fix edit there).
pub fn findings_outside(baseline: &[Diagnostic], edited: &EditedStatement) -> Option<(Vec<Diagnostic>, Vec<Diagnostic>)> {
    let span = &edited.old;
    let mut before = Vec::new();
    let mut after = Vec::new();
    for d in baseline {
        if touches(&d.range, span) {
            continue;
        }
        let mut places =
            d.evidence.iter().filter_map(|f| f.range.as_ref()).chain(d.fix.iter().flat_map(|f| f.edits.iter().map(|e| &e.range)));
        if places.any(|r| touches(r, span)) {
            return None;
        }
        let mut moved = d.clone();
        shift(&mut moved.range, span.end, edited.delta());
        for fact in &mut moved.evidence {
            if let Some(r) = &mut fact.range {
                shift(r, span.end, edited.delta());
            }
        }
        if let Some(fix) = &mut moved.fix {
            for e in &mut fix.edits {
                shift(&mut e.range, span.end, edited.delta());
            }
        }
        if d.range.start < span.start {
            before.push(moved)
        } else {
            after.push(moved)
        }
    }
    Some((before, after))
}

/// The predicted findings of `text` after an edit of `baseline`, `lint` linting a source
/// (an [`Excerpt`] of `text`); `None` when the edit is not one a prediction can follow.
/// The baseline's own text (an edit undone) has the baseline's findings.
pub fn predict(baseline: &Baseline, text: &str, tree: &Tree, lint: &dyn Fn(&str) -> Option<Vec<Diagnostic>>) -> Option<Vec<Diagnostic>> {
    if baseline.text == text {
        return Some(baseline.diagnostics.clone());
    }
    let edited = edited_statement(&baseline.text, &baseline.tree, text, tree)?;
    // A syntax error made or mended: the parser's recovery may reshape code past the
    // edited statement (a broken `for` once took a finding 70 lines below it out of the
    // complete lint), and the linter drops the findings in code an error may have mangled
    // (`memlint_linter::in_error_region`: outside function definitions, in the top-level
    // statement right after a broken one too). Followed only when the error stays in the
    // edited statement's top-level statement; the findings outside it are then dropped as
    // the linter drops them in the new tree. Mended, it is followed only when the statement
    // after it is a function (the baseline may have dropped findings in any other, which
    // it cannot give back).
    if tree.root_node().has_error() != baseline.tree.root_node().has_error() {
        let old_top = top_level_statement_around(baseline.tree.root_node(), &edited.old)?;
        let new_top = top_level_statement_around(tree.root_node(), &edited.new)?;
        if !errors_only_in(baseline.tree.root_node(), old_top) || !errors_only_in(tree.root_node(), new_top) {
            return None;
        }
        let is_function = |s: Node<'_>| undecorated(s).is_some_and(|d| d.kind() == "function_definition");
        if baseline.tree.root_node().has_error() && old_top.next_named_sibling().is_some_and(|next| !is_function(next)) {
            return None;
        }
    }
    let (mut found, mut after) = findings_outside(&baseline.diagnostics, &edited)?;
    if tree.root_node().has_error() {
        found.retain(|d| !memlint_linter::in_error_region(tree, d.range.clone()));
        after.retain(|d| !memlint_linter::in_error_region(tree, d.range.clone()));
    }
    let excerpt = leave_out_unrelated(text, tree, &edited.new)?;
    let inside = lint(&excerpt.text)?;
    found.extend(inside.into_iter().map(|d| excerpt.finding_to_original(d)).filter(|d| edited.new.contains(&d.range.start)));
    found.extend(after);
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlint_linter::{lint, LinterSettings};

    const TWO: &str = "import torch\n\n\ndef train(model, loader, optimizer):\n    total = 0\n    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n        total += loss\n        torch.cuda.empty_cache()\n    return total\n\n\ndef evaluate(model, loader):\n    model.eval()\n    outs = []\n    for x, _ in loader:\n        outs.append(model(x))\n    return outs\n";

    fn parse(text: &str) -> Tree {
        memlint_python::parse_with(text, None)
    }

    fn lint_text(text: &str) -> Vec<Diagnostic> {
        lint(text, &LinterSettings::default()).diagnostics
    }

    fn baseline(text: &str) -> Baseline {
        Baseline { text: text.to_owned(), tree: parse(text), diagnostics: lint_text(text), generation: 0 }
    }

    /// `text` with `find` (which occurs once) replaced by `with`.
    fn edit(text: &str, find: &str, with: &str) -> String {
        assert_eq!(text.matches(find).count(), 1, "{find:?} must occur once");
        text.replacen(find, with, 1)
    }

    fn prediction(old: &str, new: &str) -> Option<Vec<Diagnostic>> {
        predict(&baseline(old), new, &parse(new), &|s| Some(lint_text(s)))
    }

    #[test]
    fn an_edit_inside_a_body_names_its_definition() {
        let new = edit(TWO, "    outs.append", "    outs.appxend");
        let found = edited_statement(TWO, &parse(TWO), &new, &parse(&new)).unwrap();
        let start = TWO.find("def evaluate").unwrap();
        assert_eq!(found.old, start..TWO.trim_end().len());
        assert_eq!(found.new, start..new.trim_end().len());
    }

    #[test]
    fn a_letter_typed_at_the_end_of_a_statement_names_it() {
        // At the end of the file's last line, and at the end of a function's last line.
        for (find, with) in [("    return outs\n", "    return outsx\n"), ("    return total\n", "    return totalx\n")] {
            let new = edit(TWO, find, with);
            let found = edited_statement(TWO, &parse(TWO), &new, &parse(&new)).unwrap();
            let start = TWO[..TWO.find(find).unwrap()].rfind("\ndef ").unwrap() + 1;
            assert_eq!(found.old.start, start, "{with:?}");
            assert_eq!(prediction(TWO, &new).unwrap(), lint_text(&new), "{with:?}");
        }
    }

    #[test]
    fn an_edit_of_a_header_or_between_definitions_is_not_followed() {
        for (find, with) in [
            ("def evaluate(model, loader)", "def evaluate(model, loader, d)"),
            ("import torch\n", "import torch as t\n"),
            ("\n\n\ndef evaluate", "\nx = 1\n\ndef evaluate"),
        ] {
            let new = edit(TWO, find, with);
            assert_eq!(edited_statement(TWO, &parse(TWO), &new, &parse(&new)), None, "{find:?} -> {with:?}");
        }
        assert_eq!(edited_statement(TWO, &parse(TWO), TWO, &parse(TWO)), None, "no edit");
    }

    #[test]
    fn a_prediction_moves_the_findings_after_the_edit_and_relints_the_edited_body() {
        // `total` renamed in one place: the accumulation's finding goes, the others stay.
        let new = edit(TWO, "        total += loss", "        totxal += loss");
        assert_eq!(prediction(TWO, &new).unwrap(), lint_text(&new));
        let new = edit(TWO, "    total = 0\n", "    total = 0; seen = 0\n");
        assert_eq!(prediction(TWO, &new).unwrap(), lint_text(&new));
        let new = edit(TWO, "    model.eval()\n", "    model.eval(); print('x')\n");
        assert_eq!(prediction(TWO, &new).unwrap(), lint_text(&new));
        // A line added: the lines named in the messages after it would change.
        let new = edit(TWO, "    total = 0\n", "    total = 0\n    seen = 0\n");
        assert_eq!(prediction(TWO, &new), None);
    }

    /// What a prediction cannot see: `evaluate`'s finding depends on its caller's `no_grad`,
    /// and the edit is in the caller. The server's complete lint corrects it.
    const CALLER: &str = "import torch\n\n\ndef evaluate(model, loader):\n    model.eval()\n    outs = []\n    for x in loader:\n        outs.append(model(x).argmax(1).tolist())\n    return outs\n\n\ndef run(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n\n\ndef summarize(values):\n    count = 0\n    for v in values:\n        count += 1\n    average = sum(values) / max(count, 1)\n    print(f\"{count} values, average {average:.3f}\")\n    return average\n";

    #[test]
    fn a_finding_that_rests_on_a_caller_is_not_foreseen() {
        let new = edit(CALLER, "torch.no_grad", "torch.nxo_grad");
        assert!(lint_text(CALLER).is_empty());
        assert_eq!(lint_text(&new).len(), 1);
        assert_eq!(prediction(CALLER, &new), Some(Vec::new()));
    }

    #[test]
    fn an_edit_that_makes_or_mends_a_syntax_error_is_followed_only_where_the_error_stays() {
        // A stray `)` in `train`: the statement after it (`evaluate`) is a function, whose
        // findings the linter keeps after a broken statement.
        let broken = edit(TWO, "        loss.backward()", "        loss.backward())");
        assert!(parse(&broken).root_node().has_error());
        assert!(edited_statement(TWO, &parse(TWO), &broken, &parse(&broken)).is_some());
        assert_eq!(prediction(TWO, &broken).unwrap(), lint_text(&broken));
        assert_eq!(prediction(&broken, TWO).unwrap(), lint_text(TWO));
        // After it, a loop at module level with a finding: dropped as the linter drops it
        // when the error is made; when it is mended, the baseline had dropped it, and no
        // prediction is made.
        let evaluate = TWO.find("\n\n\ndef evaluate").unwrap();
        let text = format!(
            "{}\n\n\nfor x in loader:\n    outs = [net(x)]\n    torch.cuda.empty_cache()\n{}\n\n\ndef report(values):\n    print(sum(values) / len(values), values[0], values[-1], max(values), min(values))\n",
            &TWO[..evaluate],
            &TWO[evaluate..]
        );
        let broken = edit(&text, "        loss.backward()", "        loss.backward())");
        assert!(lint_text(&text).iter().any(|d| d.rule == memlint_linter::Rule::EmptyCacheInLoop), "{text}");
        assert_eq!(prediction(&text, &broken).unwrap(), lint_text(&broken));
        assert_eq!(prediction(&broken, &text), None);
        // `rxeturn` in the last function: the error stays in it, nothing follows it.
        let broken = edit(TWO, "    return outs", "    rxeturn outs");
        assert!(parse(&broken).root_node().has_error());
        assert_eq!(prediction(TWO, &broken).unwrap(), lint_text(&broken));
        assert_eq!(prediction(&broken, TWO).unwrap(), lint_text(TWO));
    }

    #[test]
    fn the_baselines_own_text_has_its_findings() {
        assert_eq!(prediction(TWO, TWO).unwrap(), lint_text(TWO));
    }

    #[test]
    fn a_finding_outside_whose_evidence_is_inside_stops_the_prediction() {
        let mut d = lint_text(TWO).into_iter().next().unwrap();
        let inside = TWO.find("def evaluate").unwrap() + 20;
        d.evidence.push(memlint_python::Fact { text: "there".into(), range: Some(inside..inside + 3) });
        let edited = EditedStatement { old: inside - 20..TWO.len(), new: inside - 20..TWO.len() + 1 };
        assert!(findings_outside(&[d.clone()], &edited).is_none());
        d.evidence.pop();
        assert!(findings_outside(&[d], &edited).is_some());
    }

    #[test]
    fn leaving_out_keeps_lines_and_the_definitions_tied_by_name() {
        let text = "import torch\n\ndef helper(m):\n    return m\n\ndef other():\n    é = 1\n    for i in range(10):\n        print(i, é)\n    return é\n\ndef train(model):\n    return helper(model)\n\ndef caller():\n    train(None)\n";
        let tree = parse(text);
        let train = text.find("def train").unwrap();
        let end = text.find("\n\ndef caller").unwrap();
        let excerpt = leave_out_unrelated(text, &tree, &(train..end)).unwrap();
        let blanked = &excerpt.text;
        assert_eq!(blanked.lines().count(), text.lines().count());
        // Offsets move back: in the kept statements before and after what was left out.
        for kept in ["def helper(m)", "def train(model)", "train(None)"] {
            assert_eq!(excerpt.to_original(blanked.find(kept).unwrap()), text.find(kept).unwrap(), "{kept}");
        }
        assert!(blanked.contains("def helper(m)") && blanked.contains("def caller()") && blanked.contains("import torch"));
        assert!(!blanked.contains("def other"));
    }

    /// The example script the editor benchmark copies.
    const SCRIPT: &str = include_str!("../../../tests/examples/train_classifier.py");

    #[test]
    fn copies_of_one_script_keep_only_what_the_edited_copy_resolves_to() {
        // A call in a function body sees the last definition of its name: the third
        // copy's `validate` has no caller (every `main` calls the last copy's), so the
        // other copies' definitions are left out.
        let text = SCRIPT.repeat(4);
        // The excerpt for an edit in copy `n`'s `validate`, and the text with a letter typed
        // in its body.
        let edit_validate = |n: usize| {
            let start = n * SCRIPT.len() + SCRIPT.find("def validate").unwrap();
            let end = n * SCRIPT.len() + SCRIPT.find("\n\n\ndef main").unwrap();
            let excerpt = leave_out_unrelated(&text, &parse(&text), &(start..end)).unwrap().text;
            (excerpt, format!("{}{}", &text[..start + 100], &text[start + 100..].replacen("val_loader", "vxal_loader", 1)))
        };
        let (excerpt, new) = edit_validate(2);
        assert_eq!(excerpt.matches("def validate").count(), 1);
        assert_eq!(excerpt.matches("def main").count(), 0);
        // Of the four `import torch`, the last (the one the model looks `torch` up by).
        assert_eq!(excerpt.matches("import torch\n").count(), 1);
        assert_eq!(prediction(&text, &new).unwrap(), lint_text(&new));
        // The last copy's `validate` is every `main`'s: they are kept, and what they call.
        let (excerpt, new) = edit_validate(3);
        assert_eq!(excerpt.matches("def main").count(), 4);
        assert_eq!(excerpt.matches("def train_one_epoch").count(), 1);
        assert_eq!(prediction(&text, &new).unwrap(), lint_text(&new));
    }

    #[test]
    fn an_edit_of_a_statement_outside_definitions_is_followed_when_it_binds_the_same_names() {
        let text = SCRIPT.repeat(2);
        // A docstring (the second copy's): it binds and uses nothing.
        let second = text.rfind("\"\"\"Image classifier").unwrap();
        let new = format!("{}{}", &text[..second], text[second..].replacen("classifier", "clxassifier", 1));
        let found = edited_statement(&text, &parse(&text), &new, &parse(&new)).unwrap();
        assert_eq!(found.old.start, second);
        assert_eq!(prediction(&text, &new).unwrap(), lint_text(&new));
        // A script's loop at module level: the definitions it calls are kept.
        let script = "import torch\n\n\ndef make():\n    return torch.nn.Linear(2, 2)\n\n\ndef unrelated(values):\n    total = 0\n    for v in values:\n        total = total + v * 2 - 1\n    return total\n\n\nmodel = make()\nopt = torch.optim.SGD(model.parameters())\nlosses = []\nfor x in range(10):\n    loss = model(torch.ones(2)).sum()\n    loss.backward()\n    opt.step()\n    losses.append(loss)\n";
        let new = edit(script, "losses.append(loss)", "losses.append(loss.item())");
        assert!(edited_statement(script, &parse(script), &new, &parse(&new)).is_some());
        assert_eq!(prediction(script, &new).unwrap(), lint_text(&new));
        assert_ne!(lint_text(script), lint_text(&new));
        // Binding another name, an import, a comment: not followed.
        for (find, with) in [("model = make()", "modxel = make()"), ("import torch\n", "import torxch\n")] {
            let new = edit(script, find, with);
            assert_eq!(edited_statement(script, &parse(script), &new, &parse(&new)), None, "{find:?} -> {with:?}");
        }
        let commented = format!("{script}# a note\n");
        let new = edit(&commented, "# a note", "# noqa: MEM002");
        assert_eq!(edited_statement(&commented, &parse(&commented), &new, &parse(&new)), None);
    }

    #[test]
    fn a_definition_is_not_a_use_of_its_own_name() {
        // The header `def step(...)` names `step`, but the other `step` is not tied to it.
        let text = "def step(x):\n    return x\n\n\ndef step(x):\n    return x + 1\n\n\ndef other(values):\n    print(values, len(values), sum(values), max(values))\n    return values\n";
        let start = text.find("def step(x):\n    return x +").unwrap();
        let excerpt = leave_out_unrelated(text, &parse(text), &(start..text.find("\n\n\ndef other").unwrap())).unwrap().text;
        assert_eq!(excerpt.matches("def step").count(), 1);
        assert!(!excerpt.contains("def other"));
    }

    #[test]
    fn a_script_testing_its_name_is_not_tied_to_a_definition_it_does_not_use() {
        let text = "import torch\n\n\ndef train(model):\n    return model(1)\n\n\ndef report(values):\n    print(sum(values) / len(values), values[0], values[-1])\n    return len(values) > 1000\n\n\nif __name__ == \"__main__\":\n    report([1, 2])\n";
        let tree = parse(text);
        let start = text.find("def train").unwrap();
        let blanked = leave_out_unrelated(text, &tree, &(start..text.find("\n\n\ndef report").unwrap())).unwrap().text;
        assert!(blanked.contains("def train") && blanked.contains("import torch"));
        assert!(!blanked.contains("def report") && !blanked.contains("__main__"));
    }

    /// A class whose methods an edit of one of them is not tied to.
    const CLASS: &str = "import torch\n\n\nclass Trainer:\n    def __init__(self, model):\n        self.model = model\n\n    def fit(self, loader, optimizer):\n        total = 0\n        for x, y in loader:\n            loss = self.model(x).sum()\n            loss.backward()\n            optimizer.step()\n            total += loss\n        return total\n\n    @torch.no_grad()\n    def export(self, path, example_inputs, strict=True):\n        traced = torch.jit.trace(self.model, example_inputs, strict=strict)\n        traced.save(path)\n        print(f\"exported to {path}\")\n        return traced\n\n    def describe(self):\n        lines = [str(self.model), str(sum(p.numel() for p in self.model.parameters()))]\n        return \"\\n\".join(lines)\n";

    #[test]
    fn an_edit_inside_a_method_names_the_method() {
        let new = edit(CLASS, "        total += loss", "        total += lxoss");
        let found = edited_statement(CLASS, &parse(CLASS), &new, &parse(&new)).unwrap();
        let start = CLASS.find("    def fit").unwrap() + 4;
        assert_eq!(found.old, start..CLASS.find("\n\n    @torch.no_grad()").unwrap());
        let blanked = leave_out_unrelated(&new, &parse(&new), &found.new).unwrap().text;
        assert!(blanked.contains("class Trainer:") && blanked.contains("def __init__") && blanked.contains("def fit"));
        // `describe` calls `self.model.parameters()`: evidence that `self.model` is a network.
        assert!(blanked.contains("def describe") && !blanked.contains("def export"));
        assert_eq!(prediction(CLASS, &new).unwrap(), lint_text(&new));
    }

    #[test]
    fn a_method_is_tied_to_the_method_that_sets_the_attributes_it_reads() {
        let text = "import torch\n\n\nclass TestNet:\n    def setUp(self):\n        self.model, self.data = torch.nn.Linear(2, 2), torch.ones(2)\n\n    def test_forward(self):\n        out = self.model(self.data)\n        assert out.shape == (2,)\n\n    def test_something_else(self):\n        values = [1, 2, 3]\n        assert sum(values) == 6\n        assert len(values) == 3\n        assert max(values) == 3\n";
        let method = text.find("def test_forward").unwrap()..text.find("\n\n    def test_something_else").unwrap();
        let kept = leave_out_unrelated(text, &parse(text), &method).unwrap().text;
        assert!(kept.contains("def setUp") && kept.contains("def test_forward") && !kept.contains("test_something_else"));
    }

    #[test]
    fn a_method_is_tied_to_every_class_that_sets_an_attribute_of_self_it_reads() {
        // `A` sets no `self.net`: the model knows it by what any class of the module
        // assigns to it (and calls on it there), here `B.setUp`'s.
        let text = "import torch\n\n\nclass A:\n    def test_forward(self):\n        y = self.net(torch.ones(2))\n        assert y.shape == (2,)\n\n    def test_other(self):\n        values = [1, 2, 3]\n        assert sum(values) == 6\n\n\nclass B:\n    def setUp(self):\n        self.net = torch.nn.Linear(2, 2)\n        self.net.load_state_dict({})\n\n\nclass C:\n    def test_unrelated(self):\n        values = [4, 5, 6]\n        assert max(values) == 6\n        assert min(values) == 4\n";
        let method = text.find("def test_forward").unwrap()..text.find("\n\n    def test_other").unwrap();
        let kept = leave_out_unrelated(text, &parse(text), &method).unwrap().text;
        assert!(kept.contains("class B:") && kept.contains("self.net = torch.nn.Linear"));
        assert!(!kept.contains("class C:") && !kept.contains("def test_other"));
        let new = edit(text, "assert y.shape", "assert y.sxhape");
        assert_eq!(prediction(text, &new).unwrap(), lint_text(&new));
    }

    #[test]
    fn copies_of_a_class_keep_only_the_edited_copys_attributes() {
        // Every copy's `ConvNet` sets `self.features`: the edited copy's `__init__` and
        // `forward` read only its own (a class of the same name defined again is another
        // class), so the other copies are left out.
        let text = SCRIPT.repeat(4);
        let at = 2 * SCRIPT.len() + SCRIPT.find("nn.Conv2d(64").unwrap();
        let new = format!("{}x{}", &text[..at], &text[at..]);
        let found = edited_statement(&text, &parse(&text), &new, &parse(&new)).unwrap();
        let excerpt = leave_out_unrelated(&new, &parse(&new), &found.new).unwrap().text;
        assert_eq!(excerpt.matches("class ConvNet").count(), 1, "{excerpt}");
        assert_eq!(prediction(&text, &new).unwrap(), lint_text(&new));
    }

    #[test]
    fn a_method_is_tied_to_its_base_and_derived_classes_that_set_an_attribute_it_reads() {
        // `Base.evaluate` reads `self.net`, which only `Child` sets; `Other` sets a `net` of
        // its own, which `Base` never sees.
        let text = "import torch\n\n\nclass Base:\n    def evaluate(self, x):\n        y = self.net(x)\n        return y.shape\n\n\nclass Child(Base):\n    def __init__(self):\n        self.net = torch.nn.Linear(2, 2)\n\n\nclass Other:\n    def __init__(self):\n        self.net = None\n        self.values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]\n\n    def total(self):\n        return sum(self.values) + len(self.values) * max(self.values)\n";
        let method = text.find("def evaluate").unwrap()..text.find("\n\n\nclass Child").unwrap();
        let kept = leave_out_unrelated(text, &parse(text), &method).unwrap().text;
        assert!(kept.contains("class Child(Base):") && kept.contains("self.net = torch.nn.Linear"), "{kept}");
        assert!(!kept.contains("class Other:"), "{kept}");
        let new = edit(text, "return y.shape", "return y.sxhape");
        assert_eq!(prediction(text, &new).unwrap(), lint_text(&new));
    }

    #[test]
    fn a_method_is_tied_to_every_use_that_shows_what_an_attribute_of_self_it_reads_is() {
        // `B.setUp` calls `self.net.eval()`: the model takes that, anywhere in the module, for
        // evidence that `self.net` is a network, so `A.test_smoke`'s forward is found.
        let text = "import torch\nfrom lib import Embedding\n\n\nclass A:\n    def setUp(self):\n        self.net = Embedding(4)\n\n    def test_smoke(self):\n        print(self.net(torch.ones(2)).argmax().item())\n\n    def test_other(self):\n        values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]\n        assert sum(values) == 210 and max(values) == 20 and min(values) == 1\n\n\nclass B:\n    def setUp(self):\n        self.net = Embedding(8)\n        self.net.eval()\n\n\nclass C:\n    def test_unrelated(self):\n        values = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]\n        assert max(values) == 21 and min(values) == 4 and len(values) == 18\n";
        let method = text.find("def test_smoke").unwrap()..text.find("\n\n    def test_other").unwrap();
        let kept = leave_out_unrelated(text, &parse(text), &method).unwrap().text;
        assert!(kept.contains("self.net.eval()") && !kept.contains("class C:") && !kept.contains("def test_other"), "{kept}");
        let new = edit(text, "argmax().item()", "argmax().ixtem()");
        assert_eq!(lint_text(&new).len(), 1);
        assert_eq!(prediction(text, &new).unwrap(), lint_text(&new));
    }

    #[test]
    fn a_module_tied_together_is_not_blanked() {
        // `main` at the bottom calls everything: nothing much would be left out.
        let text = "def a():\n    return 1\n\ndef b():\n    return a()\n\ndef main():\n    print(a(), b())\n\nmain()\n";
        let tree = parse(text);
        assert!(leave_out_unrelated(text, &tree, &(0..text.find("\n\ndef b").unwrap())).is_none());
    }

    #[test]
    fn a_statement_binds_its_targets_and_nested_definitions() {
        let text = "if x:\n    a, (b, c) = 1\n    total += 1\n    for d in y:\n        pass\n    with f() as e:\n        pass\n    def g():\n        h = 1\n    class K:\n        pass\n    obj.attr = 2\n";
        let tree = parse(text);
        let mut bound = Bound::of(tree.root_node().named_child(0).unwrap(), text).names;
        bound.sort();
        assert_eq!(bound, ["K", "a", "b", "c", "d", "e", "g", "total"]);
    }

    #[test]
    fn an_excerpt_keeps_every_line_break_and_moves_offsets_back() {
        let text = "a = 1\r\ndef gone():\r\n    é = 2\r\n\r\nb = 3\r\n";
        let gone = text.find("def gone").unwrap()..text.find("\r\n\r\nb").unwrap();
        let excerpt = Excerpt::leaving_out(text, &[gone]);
        assert_eq!(excerpt.text, "a = 1\r\n\r\n\r\n\r\nb = 3\r\n");
        assert_eq!(excerpt.to_original(excerpt.text.find('b').unwrap()), text.find('b').unwrap());
        assert_eq!(excerpt.to_original(2), 2);
    }

    #[test]
    fn common_ends_are_counted_across_blocks() {
        let long = "ab".repeat(1000);
        for (a, b) in [(long.clone() + "x" + &long, long.clone() + "yz" + &long), (long.clone(), long.clone() + "q"), (String::new(), long.clone())] {
            let (a, b) = (a.as_bytes(), b.as_bytes());
            let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            let suffix = a.iter().rev().zip(b.iter().rev()).take_while(|(x, y)| x == y).count();
            assert_eq!((common_prefix(a, b), common_suffix(a, b)), (prefix, suffix));
        }
    }

    #[test]
    fn words_are_whole_names() {
        assert_eq!(words("x = train_1(y.é) # no").collect::<Vec<_>>(), ["x", "train_1", "y", "é", "no"]);
        assert_eq!(words("for x in self.items: return None").collect::<Vec<_>>(), ["x", "items"]);
    }
}
