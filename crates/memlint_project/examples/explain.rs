//! What the semantic model says about the calls on one line of a file, with the project
//! around it (a developer's tool for finding which fact a finding rests on, or which is
//! missing):
//!
//!     cargo run -p memlint_project --example explain -- FILE LINE [PROJECT_ROOT]
//!
//! For each call on the line: the callee's value and the facts it rests on, whether it is
//! a forward pass, the gradient context, and where the call's value goes (its fate).

use std::path::PathBuf;

use memlint_project::Project;
use memlint_python::{NodeExt, ProjectResolver, SemanticModel};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(file), Some(line)) = (args.first(), args.get(1).and_then(|l| l.parse::<usize>().ok())) else {
        eprintln!("usage: explain FILE LINE [PROJECT_ROOT]");
        std::process::exit(2);
    };
    let path = PathBuf::from(file).canonicalize().unwrap_or_else(|e| {
        eprintln!("{file}: {e}");
        std::process::exit(2)
    });
    let root = args.get(2).map(PathBuf::from).unwrap_or_else(|| path.parent().unwrap().to_path_buf());
    let source = std::fs::read_to_string(&path).unwrap();
    let project = Project::new(vec![root.canonicalize().unwrap()], vec![path.clone()]);
    let resolver = ProjectResolver::new(&project, Project::key(&path));
    let parsed = memlint_python::parse(&source);
    let model = SemanticModel::with_project(&parsed.tree, &source, &resolver);
    for call in model.calls().iter().filter(|c| c.start_position().row + 1 == line) {
        println!("call `{}`", model.short_text(*call));
        if let Some(callee) = call.field("function") {
            let value = model.value(callee);
            println!("  callee value: {:?} ({:?})", value.kind, value.basis);
            for fact in model.explain_value(callee) {
                println!("    - {}", fact.text);
            }
        }
        println!("  forward pass of: {:?}", model.forward_callee(*call).map(|m| model.short_text(m)));
        println!("  call value: {:?}", model.value(*call).kind);
        println!("  gradient context: {:?}", model.grad_context(*call));
        println!("  class forward without grad: {:?}", model.class_forward_disables_grad(*call));
        println!("  fate: {:?}", model.fate(*call));
        if let Some(module) = model.forward_callee(*call) {
            println!("  network frozen: {}, call gives history: {}", model.is_frozen_network(module), model.gives_history(*call));
        }
        println!("  callers elsewhere disable grad: {:?}", model.grad_disabled_by_callers_elsewhere(*call).is_some());
        if let Some(f) = model.enclosing_function(*call) {
            println!("  in `{}()`, local callers: {}, results kept by callers elsewhere: {:?}", f.name, model.calls_of_function(f).len(), model.external_results_kept(f.node));
        }
    }
}
