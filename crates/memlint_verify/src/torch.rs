//! `--compare-torch`: runs the same loops through PyTorch and reads its allocator's figures.
//!
//! The script (`torch/verify_torch.py`) is embedded in the binary, so an installed `memlint` does not
//! need the source tree; it is written to a temporary file and run with `python3`.

use std::io::Write;
use std::process::Command;

use crate::report::{ScenarioReport, TorchComparison};
use crate::scenarios::{Metric, Workload};

/// The PyTorch twin of the reference loops.
pub const SCRIPT: &str = include_str!("../torch/verify_torch.py");
/// MEM007's PyTorch side: DataParallel and DDP on several GPUs.
pub const PARALLEL_SCRIPT: &str = include_str!("../torch/verify_torch_parallel.py");

/// Runs `verify_torch_parallel.py` on `devices` GPUs; never fails: problems are in `error`.
pub fn run_torch_parallel(python: &str, wl: &Workload, devices: usize) -> crate::parallel::TorchParallel {
    let unavailable = |e: String| crate::parallel::TorchParallel { error: Some(e), ..Default::default() };
    let args = [
        "--devices".to_string(),
        devices.to_string(),
        "--layers".into(),
        wl.layers.to_string(),
        "--hidden".into(),
        wl.hidden.to_string(),
        "--batch".into(),
        wl.batch.to_string(),
        "--iters".into(),
        wl.iters.to_string(),
        "--classes".into(),
        wl.classes.to_string(),
        "--dtype".into(),
        wl.dtype.name().to_string(),
    ];
    match run_script(python, PARALLEL_SCRIPT, &args) {
        Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| unavailable(format!("could not read the PyTorch script's output: {e}"))),
        Err(e) => unavailable(e),
    }
}

/// Writes `script` to a temporary file, runs it with `python` and returns the last line of its
/// standard output that starts with `{`.
fn run_script(python: &str, script: &str, args: &[String]) -> Result<String, String> {
    let mut file = tempfile::Builder::new()
        .prefix("memlint_verify_torch")
        .suffix(".py")
        .tempfile()
        .map_err(|e| format!("could not write the PyTorch script to a temporary file: {e}"))?;
    file.write_all(script.as_bytes()).and_then(|_| file.flush()).map_err(|e| format!("could not write the PyTorch script to a temporary file: {e}"))?;
    let output = match Command::new(python).arg(file.path()).args(args).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(format!("{python} was not found on PATH")),
        Err(e) => return Err(format!("could not run {python}: {e}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout.lines().rev().find(|l| l.trim_start().starts_with('{')) {
        Some(l) => Ok(l.to_string()),
        None => {
            let err = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = err.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
            Err(format!("the PyTorch script failed ({}): {}", output.status, tail.join(" | ")))
        }
    }
}

/// Runs the script; never fails: problems are reported in the comparison's `error`.
pub fn run_torch(python: &str, wl: &Workload, device: usize, codes: &[&str]) -> TorchComparison {
    let unavailable = |e: String| TorchComparison { error: Some(e), ..Default::default() };
    let mut file = match tempfile::Builder::new().prefix("memlint_verify_torch").suffix(".py").tempfile() {
        Ok(f) => f,
        Err(e) => return unavailable(format!("could not write the PyTorch script to a temporary file: {e}")),
    };
    if let Err(e) = file.write_all(SCRIPT.as_bytes()).and_then(|_| file.flush()) {
        return unavailable(format!("could not write the PyTorch script to a temporary file: {e}"));
    }
    let output = Command::new(python)
        .arg(file.path())
        .args(["--layers", &wl.layers.to_string()])
        .args(["--hidden", &wl.hidden.to_string()])
        .args(["--batch", &wl.batch.to_string()])
        .args(["--iters", &wl.iters.to_string()])
        .args(["--classes", &wl.classes.to_string()])
        .args(["--dtype", wl.dtype.name()])
        .args(["--device", &device.to_string()])
        .args(["--only", &codes.join(",")])
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return unavailable(format!("{python} was not found on PATH")),
        Err(e) => return unavailable(format!("could not run {python}: {e}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().rev().find(|l| l.trim_start().starts_with('{'));
    match last.map(serde_json::from_str::<TorchComparison>) {
        Some(Ok(t)) => t,
        Some(Err(e)) => unavailable(format!("could not read the PyTorch script's output: {e}")),
        None => {
            let err = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = err.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
            unavailable(format!("the PyTorch script failed ({}): {}", output.status, tail.join(" | ")))
        }
    }
}

/// Fills in PyTorch's saving on each scenario's metric and our relative difference to it.
pub fn attach(t: &mut TorchComparison, ours: &[ScenarioReport]) {
    for ts in &mut t.scenarios {
        let Some(s) = ours.iter().find(|s| s.code == ts.code && s.variant == ts.variant) else { continue };
        let (b, f) = match s.metric {
            Metric::Held => (ts.held_bytes_bad, ts.held_bytes_fixed),
            _ => (ts.peak_bytes_bad, ts.peak_bytes_fixed),
        };
        ts.saving_bytes = match (b, f) {
            (Some(b), Some(f)) => Some(b as i64 - f as i64),
            _ => None,
        };
        ts.saving_difference_bytes = match (s.saving_bytes, ts.saving_bytes) {
            (Some(o), Some(t)) => Some(o - t),
            _ => None,
        };
        ts.saving_relative_difference = match (s.saving_bytes, ts.saving_bytes) {
            (Some(o), Some(t)) if t.unsigned_abs() >= 1 << 20 => Some((o - t) as f64 / (t as f64).abs()),
            _ => None,
        };
    }
}
