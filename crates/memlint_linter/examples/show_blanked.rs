//! Prints what `memlint check` parses of a file: function bodies that cannot matter are blank.
//!
//! ```sh
//! cargo run --release -p memlint_linter --example show_blanked -- FILE
//! ```
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: show_blanked FILE");
        std::process::exit(2);
    };
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2);
    });
    match memlint_linter::prefilter::text_to_parse(&source, &memlint_linter::RuleSelection::all()) {
        Some(text) => print!("{text}"),
        None => eprintln!("{path}: parsed whole (or not at all)"),
    }
}
