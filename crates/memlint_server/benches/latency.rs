//! didChange -> publishDiagnostics latency of the real server, in-process over a duplex
//! pipe, for training scripts of about 1k, 5k and 20k lines. Prints median and p95.
//!
//! `cargo bench -p memlint_server` (add `-- --quick` for fewer rounds).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{push_client, TestClient};
use serde_json::{json, Value};

/// One block of a realistic training script (a model, a training loop with findings, an
/// evaluation function, a data pipeline): about 60 lines. `{i}` makes names unique.
const BLOCK: &str = r#"
class Block{i}Net(nn.Module):
    """Residual MLP block {i}."""

    def __init__(self, width=512, depth=4, dropout=0.1):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        for layer in self.layers:
            x = x + self.drop(F.gelu(layer(self.norm(x))))
        return x


def train_block{i}(model, loader, optimizer, scheduler, device, epochs=3):
    model.train()
    history = []
    for epoch in range(epochs):
        running_loss = 0
        for step, (inputs, targets) in enumerate(loader):
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad(set_to_none=True)
            outputs = model(inputs)
            loss = F.cross_entropy(outputs, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            running_loss += loss
            if step % 100 == 0:
                print(f"epoch {epoch} step {step}: {running_loss / (step + 1):.4f}")
                torch.cuda.empty_cache()
        history.append(running_loss)
    return history


def evaluate_block{i}(model, loader, device):
    model.eval()
    correct, seen = 0, 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        correct += (logits.argmax(dim=1) == targets).sum().item()
        seen += targets.numel()
    return correct / max(seen, 1)


def make_loader_block{i}(dataset, batch_size=64, workers=4):
    sampler = torch.utils.data.RandomSampler(dataset)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers, pin_memory=True)
"#;

fn script(lines: usize) -> String {
    let mut text = String::from("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch.utils.data import DataLoader\n");
    let mut i = 0;
    while text.lines().count() < lines {
        text.push_str(&BLOCK.replace("{i}", &i.to_string()));
        i += 1;
    }
    text
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank]
}

async fn measure(lines: usize, rounds: usize) -> (usize, usize, Vec<Duration>) {
    let text = script(lines);
    let line_count = text.lines().count();
    let uri = format!("file:///memlint-bench/train_{lines}.py");
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, None).await;
    client.open(&uri, &text).await;
    let first = client.diagnostics_for(&uri).await;
    let findings = first["params"]["diagnostics"].as_array().map(Vec::len).unwrap_or(0);
    // Typing in the middle of the file: add a character to a statement, then remove it.
    let accumulations: Vec<usize> =
        text.lines().enumerate().filter(|(_, l)| l.contains("running_loss += loss")).map(|(n, _)| n).collect();
    let target = accumulations[accumulations.len() / 2];
    let column = 12 + "running_loss".len();
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let version = round as i64 + 2;
        let change = if round % 2 == 0 {
            json!({"range": {"start": {"line": target, "character": column}, "end": {"line": target, "character": column}}, "text": "_"})
        } else {
            json!({"range": {"start": {"line": target, "character": column}, "end": {"line": target, "character": column + 1}}, "text": ""})
        };
        let started = Instant::now();
        client.change(&uri, version as i32, json!([change])).await;
        loop {
            let publish = client.diagnostics_for(&uri).await;
            if publish["params"]["version"] == version {
                break;
            }
        }
        samples.push(started.elapsed());
    }
    client.shutdown().await;
    samples.sort();
    (line_count, findings, samples)
}

/// The linter alone on the same text (incremental parse + `lint_tree`), to tell the
/// server's own cost from the rules'.
fn lint_only(lines: usize, rounds: usize) -> Vec<Duration> {
    let text = script(lines);
    let tree = memlint_python::parse_with(&text, None);
    let settings = memlint_linter::LinterSettings::default();
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            let tree = memlint_python::parse_with(&text, Some(&tree));
            std::hint::black_box(memlint_linter::lint_tree(&text, &tree, &settings));
            started.elapsed()
        })
        .collect();
    samples.sort();
    samples
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    println!("didChange -> publishDiagnostics (in-process, push diagnostics)");
    println!("{:>8} {:>9} {:>7} {:>10} {:>10} {:>10} {:>14}", "lines", "findings", "rounds", "median", "p95", "max", "lint median");
    for (lines, rounds) in [(1_000, 60), (5_000, 40), (20_000, 20)] {
        let rounds = if quick { rounds / 4 } else { rounds };
        let (line_count, findings, samples) = runtime.block_on(measure(lines, rounds));
        let lint = lint_only(lines, rounds.min(10));
        println!(
            "{:>8} {:>9} {:>7} {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>12.1}ms",
            line_count,
            findings,
            samples.len(),
            percentile(&samples, 0.5).as_secs_f64() * 1e3,
            percentile(&samples, 0.95).as_secs_f64() * 1e3,
            samples.last().map(|d| d.as_secs_f64() * 1e3).unwrap_or(0.0),
            percentile(&lint, 0.5).as_secs_f64() * 1e3,
        );
    }
}
