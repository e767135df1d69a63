//! The `check(input, expect)` helper of the data-driven tests (`check.rs`, `values.rs`):
//! the source in, one line per finding out (`row:col CODE message-start`).

use expect_test::Expect;
use memlint_linter::{lint, LineIndex, LinterSettings};

pub fn check(source: &str, expect: Expect) {
    let source = unindent(source);
    let result = lint(&source, &LinterSettings::default());
    let index = LineIndex::new(&source);
    let mut actual = String::new();
    for e in &result.syntax_errors {
        let p = index.position(e.start, &source);
        actual.push_str(&format!("{}:{} syntax-error {}\n", p.row, p.column, e.message));
    }
    for d in &result.diagnostics {
        let p = index.position(d.range.start, &source);
        let head: String = d.message.chars().take(60).collect();
        actual.push_str(&format!("{}:{} {} {}\n", p.row, p.column, d.rule.code(), head));
    }
    expect.assert_eq(&actual);
}

/// Lets tests indent their Python like the Rust around it.
pub fn unindent(text: &str) -> String {
    let text = text.strip_prefix('\n').unwrap_or(text);
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines().map(|l| if l.len() >= indent { &l[indent..] } else { l.trim_start() }).collect::<Vec<_>>().join("\n") + "\n"
}
