//! memlint_snapshot: reads the memory snapshots PyTorch writes
//! (`torch.cuda.memory._record_memory_history()` then `torch.cuda.memory._dump_snapshot(path)`)
//! and says where the memory went: the peak and the lines alive then, the lines whose
//! allocations pile up, fragmentation, out-of-memory events, and the difference between
//! two runs. It knows nothing of memlint's rules: the CLI and the server join its lines
//! to findings by file and line.

pub mod analysis;
pub mod batch;
pub mod html;
pub mod loops;
pub mod pickle;
pub mod read;
pub mod report;
pub mod sim;
pub mod source;

use std::path::{Path, PathBuf};

pub use analysis::{analyse, Device, Line};
pub use loops::{find_loop, LoopFigures};
pub use read::{read_snapshot, read_snapshot_from, read_snapshot_with_free_stacks, Snapshot};
pub use report::{diff, Diff, Report};
pub use source::SourceMap;

/// Why a snapshot could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SnapshotError {
    #[error("cannot read {}: {source}", path.display())]
    #[diagnostic(code(memlint::snapshot::io))]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} is not a pickle: {detail}", path.display())]
    #[diagnostic(code(memlint::snapshot::not_pickle), help("memlint snapshot reads the file torch.cuda.memory._dump_snapshot(path) writes"))]
    NotPickle { path: PathBuf, detail: String },
    #[error("{} is not a PyTorch memory snapshot: {detail}", path.display())]
    #[diagnostic(code(memlint::snapshot::not_snapshot), help("record one with torch.cuda.memory._record_memory_history(), run, then torch.cuda.memory._dump_snapshot(path)"))]
    NotSnapshot { path: PathBuf, detail: String },
    #[error("{} is damaged or truncated: {detail}", path.display())]
    #[diagnostic(code(memlint::snapshot::malformed))]
    Malformed { path: PathBuf, detail: String },
    #[error("{}: cannot predict other batch sizes: {detail}", path.display())]
    #[diagnostic(
        code(memlint::snapshot::batch),
        help("the batch model needs a recording of 3 iterations or more of the training loop: `memlint record --steps 4 -- python train.py`")
    )]
    Batch { path: PathBuf, detail: String },
}

impl SnapshotError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        SnapshotError::Io { path: path.to_path_buf(), source }
    }
}

/// Reads and analyses a snapshot file: the whole of `memlint snapshot FILE`.
pub fn load(path: &Path, source: Option<&SourceMap>, top: usize) -> Result<Report, SnapshotError> {
    load_with_series(path, source, top, 0)
}

/// [`load`], with the bytes over time of the first `series_lines` lines at the peak (for
/// the HTML page).
pub fn load_with_series(path: &Path, source: Option<&SourceMap>, top: usize, series_lines: usize) -> Result<Report, SnapshotError> {
    load_with(path, source, top, series_lines, None)
}

/// What `memlint snapshot --budget/--batch/--effective-batch` asks of the batch model.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchRequest {
    /// `--batch N`: the recording's batch size.
    pub batch: Option<u64>,
    /// `--budget`: bytes the caching allocator may reserve.
    pub budget: Option<u64>,
    /// `--effective-batch N`.
    pub effective_batch: Option<u64>,
}

/// [`load_with_series`], and with `batch` the batch model's predictions ([`batch`]).
pub fn load_with(path: &Path, source: Option<&SourceMap>, top: usize, series_lines: usize, batch: Option<BatchRequest>) -> Result<Report, SnapshotError> {
    let snap = if batch.is_some() { read_snapshot_with_free_stacks(path)? } else { read_snapshot(path)? };
    let mut devices = analysis::analyse_with_series(&snap, top, series_lines);
    if let Some(map) = source {
        for d in &mut devices {
            map.apply(d);
        }
    }
    let batch = match batch {
        None => None,
        Some(req) => {
            let model = batch::BatchModel::new(&snap, req.batch).map_err(|detail| SnapshotError::Batch { path: path.to_path_buf(), detail })?;
            Some(model.report(req.budget, req.effective_batch))
        }
    };
    Ok(Report { file: path.display().to_string(), devices, batch, record: snap.record.clone() })
}
