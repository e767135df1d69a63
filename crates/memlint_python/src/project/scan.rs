//! The imports of a source text by a scan of its lines, no parse ([`scan_imports`]): what
//! the linter asks the project about before it lets its pre-filter skip rules.
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
    let mut lines = LineCursor { source, at: 0 };
    // Only a line with `import` on it begins an import statement: the scan goes from one
    // such line to the next (a lint asks for every file's imports; most lines have none).
    for found in memchr::memmem::find_iter(source.as_bytes(), b"import") {
        if found < lines.at {
            // On a line a statement already read.
            continue;
        }
        lines.at = memchr::memrchr(b'\n', &source.as_bytes()[..found]).map_or(0, |i| i + 1);
        let Some(line) = lines.next() else { break };
        scan_statement(line, &mut lines, source, &mut imports);
    }
    imports
}

/// The import statement that begins on `line`, if any: a parenthesized list reads on from
/// `lines`.
fn scan_statement<'s>(line: &'s str, lines: &mut LineCursor<'s>, source: &'s str, imports: &mut Vec<ScannedImport<'s>>) {
    let line_start = line.as_ptr() as usize - source.as_ptr() as usize;
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix("from ") {
        let Some((module, names)) = rest.split_once(" import") else { return };
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
        let locals = if star {
            Vec::new()
        } else {
            locals_in(&locals_text, &source[line_start..]).into_iter().map(|(n, l)| (join_import(module, &n), l)).collect()
        };
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

/// The lines of a text from byte `at` on, split as [`str::lines`] splits them (at `\n`
/// and `\r\n`), knowing where the next begins.
struct LineCursor<'s> {
    source: &'s str,
    at: usize,
}

impl<'s> LineCursor<'s> {
    fn next(&mut self) -> Option<&'s str> {
        let rest = self.source.get(self.at..).filter(|r| !r.is_empty())?;
        match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(end) => {
                self.at += end + 1;
                let line = &rest[..end];
                Some(line.strip_suffix('\r').unwrap_or(line))
            }
            None => {
                self.at = self.source.len();
                Some(rest)
            }
        }
    }
}

/// The (name, local name) pairs of `a, b as c` (local names as slices of `source`, the
/// text from the statement on).
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

    /// The scan as it read every line, before it went from `import` to `import`: the two
    /// must agree on any text.
    fn scan_imports_line_by_line(source: &str) -> Vec<ScannedImport<'_>> {
        let mut imports = Vec::new();
        let mut lines = LineCursor { source, at: 0 };
        while let Some(line) = lines.next() {
            scan_statement(line, &mut lines, source, &mut imports);
        }
        imports
    }

    #[test]
    fn the_line_cursor_splits_as_str_lines_does() {
        for text in ["", "a", "a\n", "a\n\n", "\n", "a\r\nb", "a\rb\n", "a\r", "a\r\n\r\n", "\r\n", "x\ny\r\nz\r"] {
            let mut cursor = LineCursor { source: text, at: 0 };
            let mut lines = Vec::new();
            while let Some(line) = cursor.next() {
                lines.push(line);
            }
            assert_eq!(lines, text.lines().collect::<Vec<_>>(), "{text:?}");
        }
    }

    #[test]
    fn the_scan_from_import_to_import_reads_what_a_scan_of_every_line_reads() {
        let texts = [
            SOURCE,
            "",
            "import",
            "import torch",
            "import torch\r",
            "import torch\r\nfrom nets import Net\r\n",
            "important = 1\nreimport(x)\nfrom a import b  # import c\nimport d, e.f as g; import h\n",
            "from pkg import (A,\n    B as C,  # import D\n    import_me)\nimport after\n",
            "from pkg import (\n    A,\n    B\n",
            "from x \\\n    import y\nfrom z\n\n  import w\n",
            "def f():\n    from .m import k\n    import os.path\n    return k\n",
            "x = 'import fake'\n\"\"\"\nfrom doc import thing\n\"\"\"\nfrom m import *\n",
            "from m import a, a as b, 1bad, c.d\nimport\timport\n",
        ];
        for text in texts {
            assert_eq!(scan_imports(text), scan_imports_line_by_line(text), "{text:?}");
        }
        // And the repository's own Python files (examples, fixtures, GPU scripts).
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut folders = vec![root.join("tests"), root.join("crates")];
        let mut read = 0;
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).expect("a folder of the repository") {
                let path = entry.expect("an entry").path();
                if path.is_dir() && !path.ends_with("target") {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "py") {
                    let text = std::fs::read_to_string(&path).expect("a Python file");
                    assert_eq!(scan_imports(&text), scan_imports_line_by_line(&text), "{}", path.display());
                    read += 1;
                }
            }
        }
        assert!(read > 40, "only {read} Python files found under tests/ and crates/");
    }
}
