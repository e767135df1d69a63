//! The cases the harness rewrites: each top-level case of the linter's rule fixtures, the
//! bundled examples, and the Python files of a folder (in their project).
//!
//! A fixture holds many cases side by side. One case is a top-level definition (or a
//! statement of module-level code) with what it needs: every import of the fixture and,
//! transitively, the top-level definitions and assignments that bind a name it mentions.
//! Everything else is blanked to empty lines, so a case keeps the fixture's line numbers
//! (`eval-without-no-grad.py:21` is line 21 of the fixture in every case that holds it).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use memlint_python::tree_sitter::Node;

use memlint_python::ModuleLoader;

use crate::transform::Context;

/// One module to rewrite and lint.
#[derive(Debug, Clone)]
pub struct Case {
    /// `fixtures/eval-without-no-grad.py:21 evaluate`, `examples/train_classifier.py`,
    /// `owner__repo/train.py`.
    pub name: String,
    pub source: String,
    pub context: Context,
    /// Where the case lives on disk (a file of a folder's project); `None` for cases linted
    /// on their own (fixtures, examples).
    pub path: Option<PathBuf>,
}

/// The linter's fixtures and the bundled examples of this repository.
pub fn builtin() -> Result<Vec<Case>, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = root.join("../memlint_linter/tests/fixtures");
    let examples = root.join("../../tests/examples");
    let mut cases = Vec::new();
    for path in python_files(&fixtures)? {
        let text = read(&path)?;
        let name = format!("fixtures/{}", path.strip_prefix(&fixtures).unwrap_or(&path).display());
        cases.extend(split_fixture(&name, &text));
    }
    for path in python_files(&examples)? {
        let text = read(&path)?;
        let name = format!("examples/{}", path.strip_prefix(&examples).unwrap_or(&path).display());
        cases.push(Case { name, source: text, context: Context::default(), path: None });
    }
    if cases.is_empty() {
        return Err(format!("no fixtures or examples found under {}", root.display()));
    }
    Ok(cases)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))
}

/// The Python files under `dir`, sorted (hidden folders, `__pycache__`, virtual
/// environments and `site-packages` skipped).
pub fn python_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let entries = std::fs::read_dir(&at).map_err(|e| format!("{}: cannot list: {e}", at.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: cannot list: {e}", at.display()))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if !(name.starts_with('.') || matches!(name.as_str(), "__pycache__" | "site-packages" | "venv" | "node_modules")) {
                    stack.push(path);
                }
            } else if kind.is_file() && name.ends_with(".py") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The cases of one fixture: one per top-level definition and per top-level statement of
/// module code, each with what it needs.
pub fn split_fixture(name: &str, source: &str) -> Vec<Case> {
    let parsed = memlint_python::parse(source);
    let root = parsed.tree.root_node();
    let mut cursor = root.walk();
    let items: Vec<Node> = root.named_children(&mut cursor).filter(|c| c.kind() != "comment").collect();
    let is_import = |n: &Node| matches!(n.kind(), "import_statement" | "import_from_statement" | "future_import_statement");
    let is_definition = |n: &Node| matches!(n.kind(), "function_definition" | "class_definition" | "decorated_definition");
    // What each item binds at module level and which names it mentions.
    let mut binds: Vec<HashSet<String>> = Vec::new();
    let mut mentions: Vec<HashSet<String>> = Vec::new();
    // Names an item mentions: those that resolve to the module's symbols.
    let scopes = crate::scope::Scopes::new(source, &parsed.tree);
    for item in &items {
        binds.push(bound_names(*item, source));
        let range = item.byte_range();
        let words: HashSet<String> = scopes
            .occurrences
            .iter()
            .filter(|o| range.start <= o.range.start && o.range.end <= range.end)
            .filter(|o| o.symbol.is_some_and(|s| scopes.symbol(s).scope == 0))
            .map(|o| o.name.clone())
            .collect();
        mentions.push(words);
    }
    let binders: HashMap<&str, Vec<usize>> = {
        let mut map: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, names) in binds.iter().enumerate() {
            for n in names {
                map.entry(n.as_str()).or_default().push(i);
            }
        }
        map
    };
    let used_elsewhere = |i: usize| binds[i].iter().any(|n| mentions.iter().enumerate().any(|(j, m)| j != i && m.contains(n)));
    let mut cases = Vec::new();
    let mut seen: HashSet<BTreeSet<usize>> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        if is_import(item) {
            continue;
        }
        let mut module_code = false;
        walk(*item, &mut |n| module_code |= matches!(n.kind(), "call" | "for_statement" | "while_statement" | "with_statement"));
        if !is_definition(item) && (used_elsewhere(i) || !module_code) {
            continue;
        }
        // The item and, transitively, what binds a name it mentions.
        let mut keep: BTreeSet<usize> = items.iter().enumerate().filter(|(_, n)| is_import(n)).map(|(j, _)| j).collect();
        let mut todo = vec![i];
        while let Some(j) = todo.pop() {
            if !keep.insert(j) && j != i {
                continue;
            }
            for word in &mentions[j] {
                for k in binders.get(word.as_str()).into_iter().flatten() {
                    if !keep.contains(k) && !binds[j].contains(word) {
                        todo.push(*k);
                    }
                }
            }
        }
        if !seen.insert(keep.clone()) {
            continue;
        }
        let mut text = String::with_capacity(source.len());
        let mut at = 0;
        for j in &keep {
            let range = items[*j].byte_range();
            text.extend(source[at..range.start].chars().filter(|c| *c == '\n'));
            text.push_str(&source[range.clone()]);
            at = range.end;
        }
        text.extend(source[at..].chars().filter(|c| *c == '\n'));
        let line = item.start_position().row + 1;
        let label = definition_name(*item, source).map(|n| format!(" {n}")).unwrap_or_default();
        cases.push(Case { name: format!("{name}:{line}{label}"), source: text, context: Context::default(), path: None });
    }
    cases
}

fn walk<'t>(node: Node<'t>, f: &mut dyn FnMut(Node<'t>)) {
    f(node);
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        walk(child, f);
    }
}

fn definition_name(item: Node, source: &str) -> Option<String> {
    let def = if item.kind() == "decorated_definition" { item.child_by_field_name("definition")? } else { item };
    let name = def.child_by_field_name("name")?;
    Some(source[name.byte_range()].to_owned())
}

/// The names a top-level statement binds in the module (definitions' names, assignment
/// targets, loop and `with` targets at module level).
fn bound_names(item: Node, source: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    if let Some(name) = definition_name(item, source) {
        names.insert(name);
        return names;
    }
    fn targets(node: Node, source: &str, names: &mut HashSet<String>) {
        match node.kind() {
            "identifier" => {
                names.insert(source[node.byte_range()].to_owned());
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list" | "expression_list" | "parenthesized_expression" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    targets(child, source, names);
                }
            }
            _ => {}
        }
    }
    walk(item, &mut |n| {
        if matches!(n.kind(), "function_definition" | "class_definition" | "lambda") {
            return;
        }
        match n.kind() {
            "assignment" | "augmented_assignment" | "for_statement" => {
                if let Some(left) = n.child_by_field_name("left") {
                    targets(left, source, &mut names);
                }
            }
            "as_pattern_target" => {
                let mut cursor = n.walk();
                for child in n.named_children(&mut cursor) {
                    targets(child, source, &mut names);
                }
            }
            _ => {}
        }
    });
    names
}

/// The Python files of `root` (or those `files` names, relative to it), each a case in the
/// project `loader` reads (`all`: every Python file of the folder). A module-level name of
/// a case that another file of the folder imports (`from case import name`, or the whole
/// module: `import case`, `from pkg import case`, a star import) is protected
/// ([`Context::protected`]): renaming or moving it would break that file.
pub fn folder(root: &Path, files: Option<&[PathBuf]>, all: &[PathBuf], loader: &dyn ModuleLoader) -> Result<Vec<Case>, String> {
    let chosen: Vec<PathBuf> = match files {
        Some(list) => {
            let mut chosen = Vec::new();
            for f in list {
                let path = if f.is_absolute() { f.clone() } else { root.join(f) };
                if !path.is_file() {
                    return Err(format!("{}: no such file (named in the list of files)", path.display()));
                }
                chosen.push(path);
            }
            chosen
        }
        None => all.to_vec(),
    };
    let protection = importers(all, loader);
    let mut cases = Vec::new();
    for path in chosen {
        let source = read(&path)?;
        let dir = path.parent().unwrap_or(root);
        let protected = protection.get(&key(&path)).cloned().unwrap_or_default();
        let mut siblings = HashSet::new();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                siblings.insert(name.strip_suffix(".py").unwrap_or(&name).to_owned());
            }
        }
        let context = Context { protected, in_package: dir.join("__init__.py").is_file(), siblings };
        let name = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        cases.push(Case { name, source, context, path: Some(path) });
    }
    Ok(cases)
}

/// A file's module key (as `memlint_project::Project::key` spells it).
fn key(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// For each module of `all` that others import: the names they may use from it. A name
/// imported by `from m import name` is that name; a module imported whole (or through a
/// star import) exposes every identifier of the importing file.
fn importers(all: &[PathBuf], loader: &dyn ModuleLoader) -> HashMap<String, HashSet<String>> {
    let mut protected: HashMap<String, HashSet<String>> = HashMap::new();
    for path in all {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        let from = key(path);
        let parsed = memlint_python::parse(&text);
        let mut words: Option<HashSet<String>> = None;
        let mut every_word = |target: String, protected: &mut HashMap<String, HashSet<String>>| {
            let words = words.get_or_insert_with(|| {
                let mut set = HashSet::new();
                walk(parsed.tree.root_node(), &mut |n| {
                    if n.kind() == "identifier" {
                        set.insert(text[n.byte_range()].to_owned());
                    }
                });
                set
            });
            protected.entry(target).or_default().extend(words.iter().cloned());
        };
        let mut imports = Vec::new();
        walk(parsed.tree.root_node(), &mut |n| {
            if matches!(n.kind(), "import_statement" | "import_from_statement") {
                imports.push(n);
            }
        });
        for statement in imports {
            let text_of = |n: Node| text[n.byte_range()].to_owned();
            let mut cursor = statement.walk();
            let names: Vec<Node> = statement.children_by_field_name("name", &mut cursor).collect();
            if statement.kind() == "import_statement" {
                for name in names {
                    let dotted = if name.kind() == "aliased_import" { name.child_by_field_name("name") } else { Some(name) };
                    if let Some(target) = dotted.and_then(|d| loader.resolve_module(&from, &text_of(d))) {
                        if target != from {
                            every_word(target, &mut protected);
                        }
                    }
                }
                continue;
            }
            let Some(module) = statement.child_by_field_name("module_name").map(text_of) else { continue };
            let star = {
                let mut c = statement.walk();
                let found = statement.named_children(&mut c).any(|n| n.kind() == "wildcard_import");
                found
            };
            let target = loader.resolve_module(&from, &module).filter(|t| *t != from);
            if star {
                if let Some(target) = target {
                    every_word(target, &mut protected);
                }
                continue;
            }
            for name in names {
                let imported = if name.kind() == "aliased_import" { name.child_by_field_name("name") } else { Some(name) };
                let Some(imported) = imported.map(text_of) else { continue };
                if let Some(target) = &target {
                    protected.entry(target.clone()).or_default().insert(imported.clone());
                }
                // `from pkg import module`: the whole module.
                let joined = if module.ends_with('.') { format!("{module}{imported}") } else { format!("{module}.{imported}") };
                if let Some(sub) = loader.resolve_module(&from, &joined).filter(|t| *t != from) {
                    every_word(sub, &mut protected);
                }
            }
        }
    }
    protected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_splits_into_cases_that_keep_their_lines_and_needs() {
        let source = "import torch\n\nHIDDEN = 4\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\ndef evaluate(loader):\n    net = Net()\n    return net(loader)\n\n\ndef other():\n    return HIDDEN\n\n\nnet = Net()\nfor x in []:\n    net(x)\n";
        let cases = split_fixture("f.py", source);
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["f.py:6 Net", "f.py:10 evaluate", "f.py:15 other", "f.py:20"]);
        assert_eq!(cases[1].source, "import torch\n\n\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\ndef evaluate(loader):\n    net = Net()\n    return net(loader)\n\n\n\n\n\n\n\n\n\n");
        assert_eq!(cases[1].source.lines().count(), source.lines().count());
        assert!(cases[2].source.contains("HIDDEN = 4") && !cases[2].source.contains("class Net"));
        assert!(cases[3].source.contains("net = Net()\nfor x in []:") && cases[3].source.contains("class Net"));
    }
}

#[cfg(test)]
mod folder_tests {
    use super::*;

    #[test]
    fn names_other_files_import_are_protected() {
        let dir = std::env::temp_dir().join(format!("memlint-metamorphic-cases-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("pkg")).unwrap();
        let files = [
            ("pkg/__init__.py", "from .models import Net\n"),
            ("pkg/models.py", "class Net:\n    pass\ndef helper():\n    pass\n"),
            ("pkg/util.py", "def clip(x):\n    return x\ndef unused():\n    pass\n"),
            ("train.py", "import pkg.util\nfrom pkg import Net\nnet = Net()\npkg.util.clip(net)\n"),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let all = python_files(&dir).unwrap();
        let project = memlint_project::Project::new(Vec::new(), all.clone());
        let cases = folder(&dir, None, &all, &project).unwrap();
        let of = |name: &str| cases.iter().find(|c| c.name == name).unwrap().context.protected.clone();
        assert!(of("pkg/models.py").contains("Net") && !of("pkg/models.py").contains("helper"), "{:?}", of("pkg/models.py"));
        assert!(of("pkg/util.py").contains("clip"), "imported whole: every word of the importer");
        assert!(of("train.py").is_empty());
        assert!(of("pkg/util.py").contains("net") && !of("pkg/util.py").contains("unused"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
