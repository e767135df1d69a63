//! From a pickle stream to a [`Snapshot`]: trace events are folded as they are read into
//! compact [`Event`]s (32 bytes each), their Python stacks reduced to the frames in the
//! user's code and interned, so the file's object graph is never built.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use crate::pickle::{self, Fold, List, PickleError, Value};
use crate::SnapshotError;

/// A frame in the user's code: file as recorded, 1-based line, function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub file: Rc<str>,
    pub line: u32,
    pub function: Rc<str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Other,
}

/// No user frame on the stack.
pub const NO_STACK: u32 = u32::MAX;

/// One entry of `device_traces`.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub addr: u64,
    pub size: u64,
    pub time_us: i64,
    /// Index into [`Snapshot::stacks`], or [`NO_STACK`]. Kept for allocations, OOMs and
    /// segment allocations (and `free_requested` with [`read_snapshot_with_free_stacks`]).
    pub stack: u32,
    pub action: Action,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    Allocated,
    PendingFree,
    Inactive,
}

#[derive(Clone, Debug)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub requested_size: u64,
    pub state: BlockState,
    pub stack: u32,
}

/// A segment of the caching allocator when the snapshot was taken.
#[derive(Clone, Debug)]
pub struct Segment {
    pub device: usize,
    pub address: u64,
    pub total_size: u64,
    pub is_expandable: bool,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Default)]
pub struct Snapshot {
    /// `device_traces`, one list of events per device.
    pub traces: Vec<Vec<Event>>,
    pub segments: Vec<Segment>,
    /// Interned frames in user code.
    pub frames: Vec<Frame>,
    /// Interned stacks: frame indices, innermost first, user frames only (never empty).
    pub stacks: Vec<Vec<u32>>,
    /// `allocator_settings.expandable_segments`.
    pub expandable_segments: bool,
    /// What `memlint record` added to the snapshot (the `memlint_record` key), if it made it.
    pub record: Option<RecordInfo>,
    /// Per device, the spans of `Optimizer.step` (start and end, µs) that PyTorch annotates
    /// in `external_annotations` (end `i64::MAX`: still running when the snapshot was taken).
    pub optimizer_steps: Vec<Vec<(i64, i64)>>,
    /// The snapshot has `external_annotations` (PyTorch 2.5 and later annotate optimizer
    /// steps there): a training run recorded with them and without steps has none.
    pub has_annotations: bool,
}

/// What `memlint record` adds to a snapshot under the `memlint_record` key: figures PyTorch
/// reported when the snapshot was taken, and the batch size it saw.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RecordInfo {
    /// The leading dimension of the first tensor given to a module in the forward passes
    /// (the most frequent one among those with gradients on).
    pub batch: Option<u64>,
    /// Why the snapshot was taken: `exit`, `oom` or `steps`.
    pub reason: Option<String>,
    /// Optimizer steps seen when it was taken.
    pub steps: Option<u64>,
    /// `torch.cuda.max_memory_allocated()` / `max_memory_reserved()` then (the current device).
    pub max_memory_allocated: Option<u64>,
    pub max_memory_reserved: Option<u64>,
}

/// Whether a recorded frame is in the user's code: a `.py` file that is not in
/// site-packages/dist-packages, the standard library, PyTorch itself or `memlint record`'s
/// recorder.
pub fn is_user_file(file: &str) -> bool {
    let f: std::borrow::Cow<str> = if file.contains('\\') { file.replace('\\', "/").into() } else { file.into() };
    if !(f.ends_with(".py") || f.ends_with(".ipynb")) || f.starts_with('<') {
        return false;
    }
    if f.contains("/site-packages/") || f.contains("/dist-packages/") || f.contains("/torch/") {
        return false;
    }
    // `memlint record`'s recorder (its wrapper of GradScaler.step is on the stack of a step)
    if f.ends_with("/sitecustomize.py") && f.rsplit('/').nth(1).is_some_and(|d| d.starts_with("memlint-record-")) {
        return false;
    }
    // the standard library: .../lib/python3.X/<module>.py (site-packages excluded above)
    if let Some(i) = f.find("/lib/python") {
        let rest = &f[i + "/lib/python".len()..];
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            return false;
        }
    }
    true
}

const ROLE_TRACES: u32 = 2;
const ROLE_SEGMENTS: u32 = 3;
const ROLE_DEVICE: u32 = 16;

#[derive(Default)]
struct Reader {
    snap: Snapshot,
    frame_ids: HashMap<Frame, u32>,
    stack_ids: HashMap<Vec<u32>, u32>,
    /// Frame lists the pickle shares through its memo, by address (kept alive here).
    shared_stacks: HashMap<usize, (Rc<List>, u32)>,
    saw_traces: bool,
    saw_segments: bool,
    strings: std::collections::HashSet<Rc<str>>,
    /// Keep the stacks of `free_requested` events too ([`read_snapshot_with_free_stacks`]).
    free_stacks: bool,
}

fn int(v: &Option<Value>) -> Option<i64> {
    v.as_ref().and_then(Value::as_i64)
}

impl Reader {
    fn intern(&mut self, s: &str) -> Rc<str> {
        if let Some(r) = self.strings.get(s) {
            return r.clone();
        }
        let r: Rc<str> = Rc::from(s);
        self.strings.insert(r.clone());
        r
    }

    fn frame_id(&mut self, f: &Value) -> Option<u32> {
        let file = f.get("filename")?;
        let file = file.as_str()?;
        if !is_user_file(file) {
            return None;
        }
        let line = f.get("line").and_then(|l| l.as_i64()).unwrap_or(0).clamp(0, u32::MAX as i64) as u32;
        let name = f.get("name");
        let function: Rc<str> = match &name {
            Some(Value::Str(s)) => self.intern(s),
            _ => self.intern(""),
        };
        let frame = Frame { file: self.intern(file), line, function };
        if let Some(&id) = self.frame_ids.get(&frame) {
            return Some(id);
        }
        let id = self.snap.frames.len() as u32;
        self.snap.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        Some(id)
    }

    fn stack_id(&mut self, frames: Option<Value>) -> u32 {
        let Some(Value::List(list)) = frames else { return NO_STACK };
        let key = Rc::as_ptr(&list) as usize;
        // held by the event and by this call: a third holder is the pickle's memo, which
        // may hand the same list to later events (an unshared list is never cached, so
        // nothing of a streamed event outlives it)
        let shared = Rc::strong_count(&list) > 2;
        if shared {
            if let Some((_, id)) = self.shared_stacks.get(&key) {
                return *id;
            }
        }
        let ids: Vec<u32> = list.items.borrow().iter().filter_map(|f| self.frame_id(f)).collect();
        let id = if ids.is_empty() {
            NO_STACK
        } else if let Some(&id) = self.stack_ids.get(&ids) {
            id
        } else {
            let id = self.snap.stacks.len() as u32;
            self.snap.stacks.push(ids.clone());
            self.stack_ids.insert(ids, id);
            id
        };
        if shared {
            self.shared_stacks.insert(key, (list, id));
        }
        id
    }

    fn event(&mut self, device: usize, item: Value) -> Result<(), String> {
        if !matches!(item, Value::Dict(_)) {
            return Err(format!("an entry of device_traces[{device}] is a {}, not a dict", item.type_name()));
        }
        let action = match item.get("action").as_ref().and_then(Value::as_str) {
            Some("alloc") => Action::Alloc,
            Some("free_requested") => Action::FreeRequested,
            Some("free_completed") => Action::FreeCompleted,
            Some("segment_alloc") => Action::SegmentAlloc,
            Some("segment_free") => Action::SegmentFree,
            Some("segment_map") => Action::SegmentMap,
            Some("segment_unmap") => Action::SegmentUnmap,
            Some("oom") => Action::Oom,
            Some(_) => Action::Other,
            None => return Err(format!("an entry of device_traces[{device}] has no 'action'")),
        };
        let addr = int(&item.get("addr")).unwrap_or(0) as u64;
        let size = int(&item.get("size")).unwrap_or(0).max(0) as u64;
        let time_us = int(&item.get("time_us")).unwrap_or(0);
        let stack = if matches!(action, Action::Alloc | Action::Oom | Action::SegmentAlloc) || (self.free_stacks && action == Action::FreeRequested) {
            self.stack_id(item.get("frames"))
        } else {
            NO_STACK
        };
        while self.snap.traces.len() <= device {
            self.snap.traces.push(Vec::new());
        }
        self.snap.traces[device].push(Event { addr, size, time_us, stack, action });
        Ok(())
    }

    fn segment(&mut self, item: Value) -> Result<(), String> {
        if !matches!(item, Value::Dict(_)) {
            return Err(format!("an entry of 'segments' is a {}, not a dict", item.type_name()));
        }
        let address = int(&item.get("address")).ok_or("a segment has no 'address'")? as u64;
        let total_size = int(&item.get("total_size")).ok_or("a segment has no 'total_size'")?.max(0) as u64;
        let device = int(&item.get("device")).unwrap_or(0).max(0) as usize;
        let is_expandable = int(&item.get("is_expandable")).unwrap_or(0) != 0;
        let mut blocks = Vec::new();
        for b in item.get("blocks").map(|b| b.items()).unwrap_or_default() {
            let state = match b.get("state").as_ref().and_then(Value::as_str) {
                Some("active_allocated") => BlockState::Allocated,
                Some("active_pending_free") => BlockState::PendingFree,
                _ => BlockState::Inactive,
            };
            let size = int(&b.get("size")).unwrap_or(0).max(0) as u64;
            blocks.push(Block {
                address: int(&b.get("address")).unwrap_or(0) as u64,
                size,
                requested_size: int(&b.get("requested_size")).unwrap_or(size as i64).max(0) as u64,
                state,
                stack: self.stack_id(b.get("frames")),
            });
        }
        self.snap.segments.push(Segment { device, address, total_size, is_expandable, blocks });
        Ok(())
    }
}

impl Fold for Reader {
    fn list_role(&mut self, parent: Option<&Value>, key: Option<&str>, index: usize) -> u32 {
        match parent {
            Some(Value::Dict(d)) if d.role.get() == 1 => match key {
                Some("device_traces") => {
                    self.saw_traces = true;
                    ROLE_TRACES
                }
                Some("segments") => {
                    self.saw_segments = true;
                    ROLE_SEGMENTS
                }
                _ => 0,
            },
            Some(Value::List(l)) if l.role.get() == ROLE_TRACES => ROLE_DEVICE + index.min(1 << 20) as u32,
            _ => 0,
        }
    }

    fn item(&mut self, role: u32, index: usize, item: Value) -> Result<(), String> {
        match role {
            ROLE_TRACES => {
                // a device's list, whose events were already folded
                while self.snap.traces.len() <= index {
                    self.snap.traces.push(Vec::new());
                }
                Ok(())
            }
            ROLE_SEGMENTS => self.segment(item),
            r if r >= ROLE_DEVICE => self.event((r - ROLE_DEVICE) as usize, item),
            _ => Ok(()),
        }
    }
}

/// Reads a snapshot written by `torch.cuda.memory._dump_snapshot` (any pickle protocol).
pub fn read_snapshot(path: &Path) -> Result<Snapshot, SnapshotError> {
    let file = std::fs::File::open(path).map_err(|e| SnapshotError::io(path, e))?;
    read_snapshot_from(file, path)
}

/// Reads a snapshot from any reader; `path` names it in errors.
pub fn read_snapshot_from(input: impl std::io::Read, path: &Path) -> Result<Snapshot, SnapshotError> {
    read_from(input, path, false)
}

/// [`read_snapshot`], also keeping the user stack of every `free_requested` event (in
/// [`Event::stack`]): which statement freed a block, as [`crate::loops`] needs to place the
/// top of a loop's iterations.
pub fn read_snapshot_with_free_stacks(path: &Path) -> Result<Snapshot, SnapshotError> {
    let file = std::fs::File::open(path).map_err(|e| SnapshotError::io(path, e))?;
    read_from(file, path, true)
}

fn read_from(input: impl std::io::Read, path: &Path, free_stacks: bool) -> Result<Snapshot, SnapshotError> {
    let mut r = Reader { free_stacks, ..Reader::default() };
    let top = match pickle::read(input, &mut r) {
        Ok(v) => v,
        Err(PickleError::Io(e)) => return Err(SnapshotError::io(path, e)),
        Err(PickleError::NoHeader(e)) if !r.saw_segments && !r.saw_traces => {
            return Err(SnapshotError::NotPickle { path: path.to_path_buf(), detail: e.to_string() })
        }
        Err(e) => return Err(SnapshotError::Malformed { path: path.to_path_buf(), detail: e.to_string() }),
    };
    let Value::Dict(_) = &top else {
        return Err(SnapshotError::NotSnapshot {
            path: path.to_path_buf(),
            detail: format!("the pickle holds a {}, not the dict _dump_snapshot writes", top.type_name()),
        });
    };
    if !r.saw_traces && !r.saw_segments {
        return Err(SnapshotError::NotSnapshot {
            path: path.to_path_buf(),
            detail: "the pickle is a dict without 'device_traces' or 'segments'".into(),
        });
    }
    if !r.saw_traces {
        return Err(SnapshotError::NotSnapshot {
            path: path.to_path_buf(),
            detail: "the snapshot has no 'device_traces': record it with torch.cuda.memory._record_memory_history() before the run".into(),
        });
    }
    r.snap.expandable_segments = top
        .get("allocator_settings")
        .and_then(|s| s.get("expandable_segments"))
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
        != 0
        || r.snap.segments.iter().any(|s| s.is_expandable);
    if let Some(rec) = top.get("memlint_record") {
        let u = |k: &str| rec.get(k).and_then(|v| v.as_i64()).and_then(|v| u64::try_from(v).ok());
        r.snap.record = Some(RecordInfo {
            batch: u("batch").filter(|b| *b > 0),
            reason: rec.get("reason").and_then(|v| v.as_str().map(str::to_string)),
            steps: u("steps"),
            max_memory_allocated: u("max_memory_allocated"),
            max_memory_reserved: u("max_memory_reserved"),
        });
    }
    // `Optimizer.step#Adam.step` START/END pairs, per device.
    let mut open: std::collections::HashMap<usize, i64> = std::collections::HashMap::new();
    r.snap.has_annotations = top.get("external_annotations").is_some();
    for a in top.get("external_annotations").map(|v| v.items()).unwrap_or_default() {
        let name = a.get("name");
        if !name.as_ref().and_then(Value::as_str).is_some_and(|n| n.starts_with("Optimizer.step")) {
            continue;
        }
        let device = int(&a.get("device")).unwrap_or(0).clamp(0, 1 << 16) as usize;
        let Some(t) = int(&a.get("time_us")) else { continue };
        match a.get("stage").as_ref().and_then(Value::as_str) {
            Some("START") => {
                open.insert(device, t);
            }
            Some("END") => {
                if let Some(s) = open.remove(&device) {
                    while r.snap.optimizer_steps.len() <= device {
                        r.snap.optimizer_steps.push(Vec::new());
                    }
                    r.snap.optimizer_steps[device].push((s, t));
                }
            }
            _ => {}
        }
    }
    // a step still running when the snapshot was taken (`memlint record --steps` takes it from
    // the step's own hook)
    for (device, start) in open {
        while r.snap.optimizer_steps.len() <= device {
            r.snap.optimizer_steps.push(Vec::new());
        }
        r.snap.optimizer_steps[device].push((start, i64::MAX));
    }
    Ok(r.snap)
}
