//! The imports of a source text by a scan of its lines, no parse ([`scan_imports`],
//! [`imported_modules`]): what the linter asks the project about before it lets its
//! pre-filter skip rules.
//!
//! Asks only [`join_import`] (the qualified name an import binds, as the summary spells
//! it); knows nothing of trees or other modules.

use super::summary::join_import;

/// One import statement found by [`scan_imports`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedImport<'s> {
    /// The module as spelled (`nets`, `.models`, `..`, `pkg.sub`).
    pub module: &'s str,
    /// The names it binds: (what the local name stands for, as the semantic model
    /// qualifies it: `m.Generator`, `.models`, `pkg`; the local name: `G`, `models`, `pkg`).
    pub locals: Vec<(String, &'s str)>,
    /// `from module import *`.
    pub star: bool,
}

/// The import statements of a source text, by a scan of its lines (no parse): `import a.b
/// as c`, `from m import a, b as c`, parenthesized lists over several lines, `from m
/// import *`. The linter asks the project about them before it lets the pre-filter skip
/// rules. Imports inside strings are found too (harmless: it may only run more rules).
pub fn scan_imports(source: &str) -> Vec<ScannedImport<'_>> {
    let mut imports = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("from ") {
            let Some((module, names)) = rest.split_once(" import") else { continue };
            let module = module.trim();
            let mut names = names.split('#').next().unwrap_or("").trim().to_owned();
            let mut locals_text = String::new();
            if names.starts_with('(') {
                // A parenthesized list, possibly over several lines.
                while !names.contains(')') {
                    match lines.next() {
                        Some(next) => {
                            names.push(' ');
                            names.push_str(next.split('#').next().unwrap_or(""));
                        }
                        None => break,
                    }
                }
                locals_text.push_str(names.trim_start_matches('(').split(')').next().unwrap_or(""));
            } else {
                locals_text.push_str(&names);
            }
            let star = locals_text.trim() == "*";
            let locals = if star { Vec::new() } else { locals_in(&locals_text, source).into_iter().map(|(n, l)| (join_import(module, &n), l)).collect() };
            imports.push(ScannedImport { module, locals, star });
        } else if let Some(rest) = line.strip_prefix("import ") {
            for part in rest.split('#').next().unwrap_or("").split(',') {
                let words: Vec<&str> = part.split_whitespace().collect();
                match words.as_slice() {
                    [module] => {
                        let first = module.split('.').next().unwrap_or(module);
                        imports.push(ScannedImport { module, locals: vec![(first.to_owned(), first)], star: false })
                    }
                    [module, "as", local] => imports.push(ScannedImport { module, locals: vec![(module.to_string(), *local)], star: false }),
                    _ => {}
                }
            }
        }
    }
    imports
}

/// The (name, local name) pairs of `a, b as c` (local names as slices of `source`).
fn locals_in<'s>(list: &str, source: &'s str) -> Vec<(String, &'s str)> {
    let is_name = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_');
    list.split(',')
        .filter_map(|part| {
            let words: Vec<&str> = part.split_whitespace().collect();
            let (name, local) = match words.as_slice() {
                [name] => (*name, *name),
                [name, "as", local] => (*name, *local),
                _ => return None,
            };
            if !is_name(name) || !is_name(local) {
                return None;
            }
            source.find(local).map(|at| (name.to_owned(), &source[at..at + local.len()]))
        })
        .collect()
}

/// The modules a source text imports, as spelled (`nets`, `.models`, `..pkg.m`, `.`):
/// a line scan for `import` statements, no parse. The linter asks the project whether any
/// of them is the project's before it lets the pre-filter skip rules.
pub fn imported_modules(source: &str) -> Vec<&str> {
    let mut modules = Vec::new();
    for line in source.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("from ") {
            if let Some(module) = rest.split_whitespace().next() {
                modules.push(module);
            }
        } else if let Some(rest) = line.strip_prefix("import ") {
            for part in rest.split(',') {
                if let Some(module) = part.split_whitespace().next() {
                    modules.push(module.trim_end_matches(['(', ')', ';', '\\']));
                }
            }
        }
    }
    modules
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "import os, torch.nn as nn\nimport pkg.sub\nfrom .models import (Generator as G,\n    Discriminator)  # nets\n\
        from nets import *\nfrom . import utils  # helpers\nx = 'import fake'\n";

    #[test]
    fn imports_by_a_line_scan() {
        let import = |module, pairs: &[(&str, &'static str)], star| ScannedImport {
            module,
            locals: pairs.iter().map(|(q, l)| (q.to_string(), *l)).collect(),
            star,
        };
        assert_eq!(
            scan_imports(SOURCE),
            [
                import("os", &[("os", "os")], false),
                import("torch.nn", &[("torch.nn", "nn")], false),
                import("pkg.sub", &[("pkg", "pkg")], false),
                import(".models", &[(".models.Generator", "G"), (".models.Discriminator", "Discriminator")], false),
                import("nets", &[], true),
                import(".", &[(".utils", "utils")], false),
            ]
        );
    }

    #[test]
    fn imported_modules_as_spelled() {
        assert_eq!(imported_modules(SOURCE), ["os", "torch.nn", "pkg.sub", ".models", "nets", "."]);
        assert!(imported_modules("x = 1\n").is_empty());
    }
}
