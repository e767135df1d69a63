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

/// What a real script would have built before the few lines a test shows: the networks,
/// losses, optimizers and loaders that snippets use by name. memlint knows a value only by
/// such facts (a name is never evidence), so a snippet that means "a network" must build
/// one; this prelude does it once for all of them.
pub const PRELUDE: &str = "\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
model = nn.Linear(4, 4)
net = nn.Linear(4, 4)
netG = nn.Linear(4, 4)
netD = nn.Linear(4, 4)
G = nn.Linear(4, 4)
D = nn.Linear(4, 4)
encoder = nn.Linear(4, 4)
decoder = nn.Linear(4, 4)
student = nn.Linear(4, 4)
policy = nn.Linear(4, 4)
criterion = nn.CrossEntropyLoss()
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler()
loader = DataLoader(range(8))
train_loader = DataLoader(range(8))
val_loader = DataLoader(range(8))
test_loader = DataLoader(range(8))
dataloader = DataLoader(range(8))
";

/// [`check`] of `source` after [`PRELUDE`]: rows and findings are the snippet's (the
/// prelude itself must find nothing).
pub fn check_with_values(source: &str, expect: Expect) {
    let snippet = unindent(source);
    let prelude_lines = PRELUDE.lines().count();
    let source = format!("{PRELUDE}{snippet}");
    let result = lint(&source, &LinterSettings::default());
    let index = LineIndex::new(&source);
    let mut actual = String::new();
    for e in &result.syntax_errors {
        let p = index.position(e.start, &source);
        actual.push_str(&format!("{}:{} syntax-error {}\n", p.row - prelude_lines, p.column, e.message));
    }
    for d in &result.diagnostics {
        let p = index.position(d.range.start, &source);
        assert!(p.row > prelude_lines, "the prelude has a finding: {} {}", d.rule.code(), d.message);
        let head: String = d.message.chars().take(60).collect();
        actual.push_str(&format!("{}:{} {} {}\n", p.row - prelude_lines, p.column, d.rule.code(), head));
    }
    expect.assert_eq(&actual);
}
