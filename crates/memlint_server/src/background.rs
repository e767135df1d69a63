//! One thread, at a lower scheduling priority, for the complete lints that follow a
//! prediction (see [`crate::incremental`]): with two cores, one of them running the last
//! keystroke's complete lint at the same priority would slow the next keystroke's first
//! answer by as much as it saves.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Mutex, OnceLock};

type Task = Box<dyn FnOnce() + Send>;

/// Runs `work` on the background thread; `None` if it panicked or the thread is gone.
pub(crate) async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (done, result) = tokio::sync::oneshot::channel();
    let task: Task = Box::new(move || {
        let _ = done.send(catch_unwind(AssertUnwindSafe(work)));
    });
    queue()?.send(task).ok()?;
    result.await.ok()?.ok()
}

fn queue() -> Option<mpsc::Sender<Task>> {
    static QUEUE: OnceLock<Option<Mutex<mpsc::Sender<Task>>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (sender, tasks) = mpsc::channel::<Task>();
        let spawned = std::thread::Builder::new().name("memlint-background".into()).spawn(move || {
            lower_priority();
            for task in tasks {
                task();
            }
        });
        spawned.ok().map(|_| Mutex::new(sender))
    });
    queue.as_ref().map(|q| q.lock().unwrap_or_else(|e| e.into_inner()).clone())
}

/// A nice value of 10 for the calling thread (on Linux the nice value is per thread).
#[cfg(target_os = "linux")]
fn lower_priority() {
    // SAFETY: plain system calls on the calling thread, with no memory passed.
    unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, 10);
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn work_runs_and_a_panic_is_none() {
        assert_eq!(super::run(|| 6 * 7).await, Some(42));
        assert_eq!(super::run(|| -> u8 { panic!("a broken lint") }).await, None);
        assert_eq!(super::run(|| 1).await, Some(1), "the thread lives on after a panic");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_thread_runs_at_a_lower_priority() {
        // SAFETY: reads the calling thread's nice value.
        let nice = super::run(|| unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as libc::id_t) }).await;
        assert!(nice.is_some_and(|n| n >= 10), "{nice:?}");
    }
}
