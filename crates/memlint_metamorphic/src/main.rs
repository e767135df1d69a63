//! `memlint-metamorphic`: rewrites Python code without changing what it does and checks
//! that memlint's findings move with their code (issue 32). See the crate's documentation.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use memlint_metamorphic::{cases, harness, transform};

/// Rewrite Python code in ways that keep its behaviour (neutral and misleading names, a
/// loop body moved into a helper, functions moved into classes, aliased imports, `for` as
/// `while`, `enumerate`/`zip` loops, networks kept in containers or built by factories,
/// gates split into variables, `if True:` around statements), lint each rewrite with
/// every memlint rule, and check that each finding moves with its code and none appears.
///
/// With no PATH, the cases are the linter's rule fixtures (one case per top-level
/// definition) and the bundled examples. With PATH, the Python files of that folder, each
/// linted in the folder's project as `memlint check` would.
///
/// Exit status: 0 when every rewrite is invariant (or the overall invariance reaches
/// --min-invariance), 1 when it does not, 2 on a usage or I/O error.
#[derive(Parser, Debug)]
#[command(name = "memlint-metamorphic", version)]
struct Args {
    /// A folder of Python files (default: the fixtures and examples of this repository).
    path: Option<PathBuf>,
    /// Only the files listed in this file (one path a line, relative to PATH; `#` comments).
    #[arg(long, value_name = "LIST", requires = "path")]
    files_from: Option<PathBuf>,
    /// Only the labelled files of the corpus manifest (`tests/corpus/manifest.csv`), in a
    /// tree materialized from it (`<owner>__<name>/<path>`, see tests/corpus/README.md).
    #[arg(long, value_name = "CSV", requires = "path", conflicts_with = "files_from")]
    manifest: Option<PathBuf>,
    /// Only these transformations (comma-separated names; see --list).
    #[arg(long, value_delimiter = ',')]
    transform: Vec<String>,
    /// List the transformations and exit.
    #[arg(long)]
    list: bool,
    /// Print every rewrite that is not invariant with the findings lost and gained.
    #[arg(long)]
    details: bool,
    /// How many of the most frequent causes of non-invariance to print.
    #[arg(long, default_value_t = 20, value_name = "N")]
    causes: usize,
    /// Print the rewrites of the cases whose name contains this text (with the chosen
    /// transformations), and lint nothing.
    #[arg(long, value_name = "CASE")]
    print: Option<String>,
    /// Write every rewrite (and the modules it adds) under this folder, as
    /// `<transformation>/<case>`, and lint nothing: to read them, or run them.
    #[arg(long, value_name = "DIR")]
    write: Option<PathBuf>,
    /// Write the whole report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Exit 0 when the overall invariance is at least this (default: only when it is 1).
    #[arg(long, value_name = "FRACTION")]
    min_invariance: Option<f64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for t in transform::ALL {
            println!("{:<18} {}", t.name, t.summary);
        }
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(ok) => {
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("memlint-metamorphic: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<bool, String> {
    let mut chosen = Vec::new();
    for name in &args.transform {
        chosen.push(transform::by_name(name).ok_or_else(|| {
            let names: Vec<&str> = transform::ALL.iter().map(|t| t.name).collect();
            format!("unknown transformation `{name}` (known: {})", names.join(", "))
        })?);
    }
    if chosen.is_empty() {
        chosen = transform::ALL.iter().collect();
    }
    if args.print.is_some() || args.write.is_some() {
        let all = match &args.path {
            None => cases::builtin()?,
            Some(root) => {
                let files = cases::python_files(root)?;
                let project = memlint_project::Project::new(Vec::new(), files.clone());
                cases::folder(root, None, &files, &project)?
            }
        };
        let pattern = args.print.as_deref().unwrap_or("");
        let mut written = 0;
        for case in all.iter().filter(|c| c.name.contains(pattern)) {
            for t in &chosen {
                let rewrite = (t.apply)(&case.source, &case.context);
                if let Some(dir) = &args.write {
                    let Some(rewrite) = &rewrite else { continue };
                    let file = dir.join(t.name).join(case_file_name(&case.name));
                    let folder = file.parent().unwrap_or(dir);
                    std::fs::create_dir_all(folder).map_err(|e| format!("{}: cannot create: {e}", folder.display()))?;
                    std::fs::write(&file, &rewrite.text).map_err(|e| format!("{}: cannot write: {e}", file.display()))?;
                    for (name, text) in &rewrite.modules {
                        let beside = folder.join(name);
                        std::fs::write(&beside, text).map_err(|e| format!("{}: cannot write: {e}", beside.display()))?;
                    }
                    written += 1;
                    continue;
                }
                match rewrite {
                    Some(rewrite) => {
                        println!("=== {} ({})\n{}", case.name, t.name, rewrite.text);
                        for (name, text) in &rewrite.modules {
                            println!("--- beside it, {name}:\n{text}");
                        }
                    }
                    None => println!("=== {} ({}): does not apply\n", case.name, t.name),
                }
            }
        }
        if let Some(dir) = &args.write {
            println!("{written} rewrites written under {}", dir.display());
        }
        return Ok(true);
    }
    let report = match &args.path {
        None => harness::run(&cases::builtin()?, &chosen, None),
        Some(root) => {
            if !root.is_dir() {
                return Err(format!("{}: not a folder", root.display()));
            }
            let list = match (&args.files_from, &args.manifest) {
                (None, Some(manifest)) => Some(manifest_files(manifest)?),
                (None, None) => None,
                (Some(list), _) => {
                    let text = std::fs::read_to_string(list).map_err(|e| format!("{}: cannot read: {e}", list.display()))?;
                    Some(
                        text.lines()
                            .map(str::trim)
                            .filter(|l| !l.is_empty() && !l.starts_with('#'))
                            .map(PathBuf::from)
                            .collect::<Vec<_>>(),
                    )
                }
            };
            let all = cases::python_files(root)?;
            let project = memlint_project::Project::new(Vec::new(), all.clone());
            let cases = cases::folder(root, list.as_deref(), &all, &project)?;
            if cases.is_empty() {
                return Err(format!("{}: no Python files", root.display()));
            }
            harness::run(&cases, &chosen, Some(&project))
        }
    };
    print!("{}", harness::table(&report));
    if args.details && !report.failures.is_empty() {
        println!("\nRewrites that are not invariant:\n");
        print!("{}", harness::details(&report));
    }
    if args.causes > 0 && !report.failures.is_empty() {
        println!("\nMost frequent causes (transformation, rule, lost or gained, message shape):\n");
        print!("{}", harness::causes_table(&report, args.causes));
    }
    if let Some(path) = &args.json {
        let json = serde_json::json!({ "report": &report, "causes": report.causes() });
        let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    let threshold = args.min_invariance.unwrap_or(1.0);
    Ok(report.overall.invariance() >= threshold)
}

/// A file path for a case's rewrite: `fixtures/x.py:21 evaluate` becomes
/// `fixtures/x.py-21-evaluate.py`; a folder's file keeps its path.
fn case_file_name(name: &str) -> PathBuf {
    if !name.contains(':') {
        return PathBuf::from(name);
    }
    let flat: String = name.chars().map(|c| if c == ':' || c == ' ' { '-' } else { c }).collect();
    PathBuf::from(format!("{flat}.py"))
}

/// The labelled files of a corpus manifest (`repo,commit,path,...`), as the materialized
/// tree spells them: `<owner>__<name>/<path>`, each once.
fn manifest_files(manifest: &std::path::Path) -> Result<Vec<PathBuf>, String> {
    let text = std::fs::read_to_string(manifest).map_err(|e| format!("{}: cannot read: {e}", manifest.display()))?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    if !header.starts_with("repo,commit,path,") {
        return Err(format!("{}: not a corpus manifest (its header must start with `repo,commit,path,`)", manifest.display()));
    }
    let mut files = std::collections::BTreeSet::new();
    for (n, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.splitn(4, ',');
        let (Some(repo), Some(_commit), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(format!("{}:{}: fewer than three columns", manifest.display(), n + 2));
        };
        let Some((owner, name)) = repo.split_once('/') else {
            return Err(format!("{}:{}: repo must be owner/name, found `{repo}`", manifest.display(), n + 2));
        };
        files.insert(PathBuf::from(format!("{owner}__{name}/{path}")));
    }
    Ok(files.into_iter().collect())
}
