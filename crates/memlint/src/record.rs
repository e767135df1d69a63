//! `memlint record -- python train.py ARGS`: runs the program unchanged with PyTorch's memory
//! history recorded, then prints the snapshot's report tied to the findings in the script's
//! folder (as `check --snapshot` does).
//!
//! The recorder is Python (`record_sitecustomize.py`), loaded as `sitecustomize` from a
//! temporary folder put first on `PYTHONPATH`; it hands over to any `sitecustomize` it hides.
//! It tells what happened through `status-PID.json` files in that folder.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use memlint_snapshot::report::mib;
use serde::Deserialize;

use crate::exit;

/// The recorder, written as `sitecustomize.py` into the temporary folder.
pub const SITECUSTOMIZE: &str = include_str!("record_sitecustomize.py");

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
memlint record -- python train.py --epochs 1\n  \
memlint record --steps 4 -o run.pickle -- python -m mypkg.train\n  \
memlint snapshot .memlint/snapshot.pickle --budget 24GiB   # then: the batch that fits\n\n\
The recorder is a sitecustomize module on a temporary PYTHONPATH entry (it runs any \
sitecustomize it hides); `python -E`, `-I` and `-S` skip it. It starts PyTorch's memory history \
when the program first uses CUDA and writes the snapshot at exit, at the first out-of-memory \
error, or after --steps optimizer steps (then the program is stopped with SystemExit(0)). With \
several processes, the first to use CUDA is recorded.\n\n\
Exit status: the program's (128+N when a signal N ended it); 2 when memlint could not run it.")]
pub struct RecordArgs {
    /// Stop the program after N optimizer steps (`optimizer.step()`, or `scaler.step()` that
    /// skipped it), once the snapshot is written.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    steps: Option<u64>,
    /// Where to write the snapshot (`.memlint/snapshot.pickle` is where the language server
    /// looks for one).
    #[arg(long, short = 'o', value_name = "FILE.pickle", default_value = ".memlint/snapshot.pickle")]
    out: PathBuf,
    /// Events PyTorch keeps in its history (a ring buffer: the oldest go first).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    max_entries: u64,
    /// How many lines to list at the peak and at each out-of-memory error (0: all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Print the snapshot's report only, without linting the script's folder.
    #[arg(long)]
    no_lint: bool,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// What the recorder wrote about one process (`status-PID.json`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Status {
    pub pid: u64,
    pub torch_imported: bool,
    pub torch: Option<String>,
    pub cuda_initialized: bool,
    pub recording: bool,
    pub steps: u64,
    pub ooms: u64,
    pub dumps: Vec<Dump>,
    pub errors: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Dump {
    pub reason: String,
    pub steps: u64,
    pub batch: Option<u64>,
    pub max_memory_allocated: u64,
    pub max_memory_reserved: u64,
    pub out: String,
}

/// The statuses the recorder left in `dir`.
pub fn read_statuses(dir: &Path) -> Vec<Status> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("status-") && name.ends_with(".json") {
            if let Ok(text) = std::fs::read_to_string(e.path()) {
                if let Ok(s) = serde_json::from_str::<Status>(&text) {
                    out.push(s);
                }
            }
        }
    }
    out.sort_by_key(|s| s.pid);
    out
}

/// What the recording came to, in words (None: a snapshot was written).
pub fn explain_nothing_recorded(statuses: &[Status], program: &str, status: &ProgramEnd) -> Option<String> {
    if statuses.iter().any(|s| !s.dumps.is_empty()) {
        return None;
    }
    let ended = status.describe();
    Some(if statuses.is_empty() {
        format!(
            "the program did not load memlint's recorder, so nothing was recorded ({ended}): is `{program}` a Python program, or one that starts Python? (`python -E`, `-I` and `-S` skip PYTHONPATH and sitecustomize)"
        )
    } else if !statuses.iter().any(|s| s.torch_imported) {
        format!("the program never imported torch, so there is no CUDA memory to record ({ended})")
    } else if !statuses.iter().any(|s| s.cuda_initialized) {
        format!(
            "the program never used CUDA: PyTorch's CUDA was never initialized, so nothing was recorded ({ended}). Is a GPU visible (torch.cuda.is_available())? Does the script fall back to the CPU?"
        )
    } else if let Some(s) = statuses.iter().find(|s| s.recording) {
        let why = if s.errors.is_empty() { String::new() } else { format!(": {}", s.errors.join("; ")) };
        format!("the program used CUDA but ended before the snapshot could be written ({ended}; killed, or os._exit()){why}")
    } else {
        let errors: Vec<&str> = statuses.iter().flat_map(|s| s.errors.iter().map(String::as_str)).collect();
        format!("the program used CUDA but the memory history could not be started ({ended}): {}", errors.join("; "))
    })
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramEnd {
    Exited(i32),
    Signal(i32),
}

impl ProgramEnd {
    fn from(status: std::process::ExitStatus) -> Self {
        if let Some(c) = status.code() {
            return ProgramEnd::Exited(c);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            if let Some(s) = status.signal() {
                return ProgramEnd::Signal(s);
            }
        }
        ProgramEnd::Exited(1)
    }
    /// The exit status memlint passes on (a shell's 128+N for a signal).
    pub fn code(self) -> u8 {
        match self {
            ProgramEnd::Exited(c) => (c & 0xff) as u8,
            ProgramEnd::Signal(s) => (128 + s).clamp(0, 255) as u8,
        }
    }
    pub fn describe(self) -> String {
        match self {
            ProgramEnd::Exited(c) => format!("it exited with status {c}"),
            ProgramEnd::Signal(s) => format!("it was killed by signal {s}"),
        }
    }
}

/// The script the command runs (`python [options] script.py args`), for the folder to lint:
/// the first argument naming an existing `.py` file; `-m module` and `-c code`: none.
pub fn script_of(command: &[OsString]) -> Option<PathBuf> {
    for a in command.iter().skip(1) {
        let s = a.to_string_lossy();
        if s == "-m" || s == "-c" {
            return None;
        }
        if s.ends_with(".py") && Path::new(a).is_file() {
            return Some(PathBuf::from(a));
        }
    }
    None
}

/// `PYTHONPATH` with `dir` first.
pub fn python_path(dir: &Path, existing: Option<OsString>) -> OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        paths.extend(std::env::split_paths(&e));
    }
    std::env::join_paths(paths).unwrap_or_else(|_| dir.as_os_str().to_os_string())
}

#[cfg(unix)]
fn ignore_interrupts_while_waiting() {
    // Ctrl-C reaches the whole foreground group: the program handles it (KeyboardInterrupt,
    // then the recorder's exit snapshot) while memlint waits to report. A handler, not
    // SIG_IGN: the child gets the default disposition back at exec.
    extern "C" fn noop(_: libc::c_int) {}
    // SAFETY: installs a handler that does nothing, for SIGINT and SIGQUIT only.
    unsafe {
        libc::signal(libc::SIGINT, noop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGQUIT, noop as *const () as libc::sighandler_t);
    }
}

#[cfg(not(unix))]
fn ignore_interrupts_while_waiting() {}

pub fn run(args: RecordArgs) -> u8 {
    let program = args.command[0].to_string_lossy().to_string();
    let dir = match tempfile::Builder::new().prefix("memlint-record-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a temporary folder for the recorder: {e}");
            return exit::ERROR;
        }
    };
    if let Err(e) = std::fs::write(dir.path().join("sitecustomize.py"), SITECUSTOMIZE) {
        eprintln!("error: cannot write the recorder into {}: {e}", dir.path().display());
        return exit::ERROR;
    }
    let out = std::path::absolute(&args.out).unwrap_or_else(|_| args.out.clone());
    if let Some(parent) = out.parent() {
        if let Err(e) = std::fs::create_dir_all(parent) {
            eprintln!("error: cannot create {}: {e}", parent.display());
            return exit::ERROR;
        }
    }
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("PYTHONPATH", python_path(dir.path(), std::env::var_os("PYTHONPATH")))
        .env("MEMLINT_RECORD_DIR", dir.path())
        .env("MEMLINT_RECORD_OUT", &out)
        .env("MEMLINT_RECORD_MAX_ENTRIES", args.max_entries.to_string())
        .env("MEMLINT_RECORD_STEPS", args.steps.unwrap_or(0).to_string());
    ignore_interrupts_while_waiting();
    let status = match cmd.status() {
        Ok(s) => ProgramEnd::from(s),
        Err(e) => {
            eprintln!("error: cannot run `{program}`: {e}");
            return exit::ERROR;
        }
    };
    let statuses = read_statuses(dir.path());
    if let Some(why) = explain_nothing_recorded(&statuses, &program, &status) {
        eprintln!("memlint record: {why}");
        return status.code();
    }
    report(&args, &out, &statuses, status);
    status.code()
}

fn report(args: &RecordArgs, out: &Path, statuses: &[Status], status: ProgramEnd) {
    let Some(s) = statuses.iter().find(|s| !s.dumps.is_empty()) else { return };
    let last = s.dumps.last().expect("a dump");
    let when = match last.reason.as_str() {
        "steps" => format!("after {} optimizer steps (--steps), then the program was stopped", last.steps),
        "oom" => "at an out-of-memory error (the program did not reach its exit)".to_string(),
        _ if s.ooms > 0 => format!("at exit, after {} out-of-memory error(s) (the first one's state was written when it happened, then replaced)", s.ooms),
        _ => "at exit".to_string(),
    };
    let shown = std::env::current_dir().ok().and_then(|d| out.strip_prefix(&d).ok().map(Path::to_path_buf)).unwrap_or_else(|| out.to_path_buf());
    eprintln!("\nmemlint record: wrote {} {when}; {}", shown.display(), status.describe());
    eprintln!(
        "  PyTorch reported max_memory_allocated {} ({} B), max_memory_reserved {}{}",
        mib(last.max_memory_allocated),
        last.max_memory_allocated,
        mib(last.max_memory_reserved),
        last.batch.map(|b| format!("; batch size seen by the forward passes: {b}")).unwrap_or_default()
    );
    match memlint_snapshot::load(out, None, args.top) {
        Ok(r) => eprint!("\n{}", r.to_text()),
        Err(e) => {
            eprint!("{}", crate::report::render_error(&e));
            return;
        }
    }
    if !args.no_lint {
        lint_script_folder(&args.command, out);
    }
    eprintln!("\nnext: memlint snapshot {} --budget 24GiB   (the batch that fits a budget)", shown.display());
}

/// `memlint check --snapshot OUT FOLDER` on the script's folder, run as a child whose standard
/// output is memlint's standard error (the program's output stays alone on standard output;
/// the findings and check's summary keep their order).
fn lint_script_folder(command: &[OsString], snapshot: &Path) {
    let Some(script) = script_of(command) else {
        eprintln!("\n(no script file in the command: the findings are not shown; run `memlint check --snapshot {} PATH`)", snapshot.display());
        return;
    };
    let folder = script.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let Ok(me) = std::env::current_exe() else { return };
    #[cfg(unix)]
    let stderr = {
        use std::os::fd::AsFd;
        match std::io::stderr().as_fd().try_clone_to_owned() {
            Ok(fd) => std::process::Stdio::from(fd),
            Err(_) => return,
        }
    };
    #[cfg(not(unix))]
    let stderr = std::process::Stdio::inherit();
    eprintln!("\nfindings in {} with what this run measured on their lines:", folder.display());
    let _ = Command::new(me)
        .arg("check")
        .arg("--snapshot")
        .arg(snapshot)
        .args(["--output-format", "text", "--no-cache", "--exit-zero"])
        .arg(&folder)
        .env_remove("MEMLINT_OUTPUT_FORMAT")
        .stdout(stderr)
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_is_the_first_python_file_argument() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("train.py");
        std::fs::write(&script, "").unwrap();
        let cmd = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let s = script.to_str().unwrap();
        assert_eq!(script_of(&cmd(&["python", "-u", s, "--lr", "1"])), Some(script.clone()));
        assert_eq!(script_of(&cmd(&["python", "-m", "pkg.train", s])), None);
        assert_eq!(script_of(&cmd(&["python", "missing.py"])), None);
    }

    #[test]
    fn pythonpath_puts_the_recorder_first_and_keeps_the_rest() {
        let p = python_path(Path::new("/tmp/rec"), Some(OsString::from("/a:/b")));
        assert_eq!(p, OsString::from("/tmp/rec:/a:/b"));
        assert_eq!(python_path(Path::new("/tmp/rec"), Some(OsString::new())), OsString::from("/tmp/rec"));
        assert_eq!(python_path(Path::new("/tmp/rec"), None), OsString::from("/tmp/rec"));
    }

    #[test]
    fn exit_statuses_pass_through() {
        assert_eq!(ProgramEnd::Exited(3).code(), 3);
        assert_eq!(ProgramEnd::Signal(9).code(), 137);
    }
}
