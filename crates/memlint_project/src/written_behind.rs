//! Files written by a thread of their own: the entries of the summary store, one small
//! file each. A lint that wrote its entry itself waited on the file system (a folder, a
//! temporary file, a rename); on the benchmark tree of issue 31 a first run with the cache
//! on took 13-35% longer than with `--no-cache` for that alone (the results cache's
//! entries then too; they are one pack now). Written here, those waits overlap the lints.
//!
//! Each file is written whole to a temporary file beside it and renamed over it: a
//! concurrent run never reads half a file. A write that fails is dropped (a cache entry
//! missing costs a lint next time). [`WrittenBehind::finish`] (or dropping it) waits for
//! every file handed over.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use rustc_hash::FxHashSet;

enum Job {
    Write(PathBuf, Vec<u8>),
    /// Answered once every write before it is done.
    Flush(Sender<()>),
}

pub struct WrittenBehind {
    sender: Mutex<Option<Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl WrittenBehind {
    /// Starts the writing thread; `None` when no thread can be started (the caller then
    /// writes nothing).
    pub fn start() -> Option<WrittenBehind> {
        let (sender, receiver) = channel::<Job>();
        let writer = std::thread::Builder::new()
            .name("memlint-writes".to_owned())
            .spawn(move || {
                let mut folders: FxHashSet<PathBuf> = FxHashSet::default();
                for job in receiver {
                    match job {
                        Job::Write(path, bytes) => write_whole(&path, &bytes, &mut folders),
                        Job::Flush(done) => drop(done.send(())),
                    }
                }
            })
            .ok()?;
        Some(WrittenBehind { sender: Mutex::new(Some(sender)), writer: Mutex::new(Some(writer)) })
    }

    /// Writes `bytes` to `path` (its folder created) on the writing thread.
    pub fn write(&self, path: PathBuf, bytes: Vec<u8>) {
        if let Some(sender) = self.sender.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = sender.send(Job::Write(path, bytes));
        }
    }

    /// Waits until every file handed over so far is written.
    pub fn flush(&self) {
        let (done, written) = channel();
        if let Some(sender) = self.sender.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if sender.send(Job::Flush(done)).is_ok() {
                let _ = written.recv();
            }
        }
    }

    /// Waits until every file handed over is written; later writes are dropped.
    pub fn finish(&self) {
        drop(self.sender.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(writer) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

impl Drop for WrittenBehind {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Writes `bytes` to `path` (its folder created, once per folder) with [`write_atomically`].
fn write_whole(path: &std::path::Path, bytes: &[u8], folders: &mut FxHashSet<PathBuf>) {
    let Some(folder) = path.parent() else { return };
    if !folders.contains(folder) {
        if std::fs::create_dir_all(folder).is_err() {
            return;
        }
        folders.insert(folder.to_owned());
    }
    let _ = write_atomically(path, bytes);
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`, so a
/// concurrent reader never sees half a file. The temporary file is named by the process
/// and a count (no two writers share one) and created as any file is (the umask decides:
/// a cache may be restored under another user); it is removed when the rename fails.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = path.with_file_name(format!(".{name}.{}.{n}", std::process::id()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_handed_over_is_written_whole_by_finish() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let writes = WrittenBehind::start().expect("a thread");
        for i in 0..200 {
            writes.write(dir.path().join(format!("{:02}", i % 7)).join(format!("{i}.entry")), vec![i as u8; 1000 + i]);
        }
        writes.flush();
        for i in 0..100 {
            assert!(dir.path().join(format!("{:02}", i % 7)).join(format!("{i}.entry")).exists(), "flushed");
        }
        writes.finish();
        for i in 0..200 {
            let bytes = std::fs::read(dir.path().join(format!("{:02}", i % 7)).join(format!("{i}.entry"))).expect("written");
            assert_eq!(bytes, vec![i as u8; 1000 + i]);
        }
        // Every file written went into one of the seven folders.
        let temporaries = (0..7)
            .flat_map(|f| std::fs::read_dir(dir.path().join(format!("{f:02}"))).expect("a folder written").flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .count();
        assert_eq!(temporaries, 0, "no temporary file left");
        writes.write(dir.path().join("late.entry"), b"late".to_vec());
        drop(writes);
        assert!(!dir.path().join("late.entry").exists(), "a write after finish is dropped");
    }

    #[test]
    fn a_file_that_cannot_be_written_is_dropped_and_the_others_are_written() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"not a folder").expect("write");
        let writes = WrittenBehind::start().expect("a thread");
        writes.write(blocker.join("under-a-file.entry"), b"x".to_vec());
        writes.write(dir.path().join("fine.entry"), b"y".to_vec());
        drop(writes);
        assert_eq!(std::fs::read(dir.path().join("fine.entry")).expect("written"), b"y");
    }
}
