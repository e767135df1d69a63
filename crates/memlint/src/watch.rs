//! `memlint check --watch`: lint, then lint again on every change to a Python file,
//! notebook or configuration file under the given paths, clearing the screen before each
//! report as `ruff check --watch` does. The results cache makes a round re-lint only the
//! files that changed.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use notify::{Event, EventKind, RecursiveMode, Watcher};

use crate::check::{run_once, CheckArgs};
use crate::exit;

/// Changes that arrive this close together are one change (an editor's save is often a
/// write, a rename and a metadata change).
const SETTLE: Duration = Duration::from_millis(150);

/// Whether a change to `path` can change the report.
fn matters(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    matches!(path.extension().and_then(|e| e.to_str()), Some("py" | "pyi" | "ipynb"))
        || matches!(name, "pyproject.toml" | "memlint.toml" | ".memlint.toml" | ".gitignore" | ".ignore")
}

/// Whether `event` can change the report: not a read, and of a file that matters outside
/// the cache folder (whose own `.gitignore` memlint writes).
fn relevant(event: &Event, cache_dir: &Path) -> bool {
    let cache_name = cache_dir.file_name();
    let in_cache = |p: &Path| cache_name.map(|name| p.components().any(|c| c.as_os_str() == name)).unwrap_or(false);
    !matches!(event.kind, EventKind::Access(_)) && event.paths.iter().any(|p| matters(p) && !in_cache(p))
}

fn clear_screen(out: &mut dyn Write) -> std::io::Result<()> {
    if std::io::stdout().is_terminal() {
        // Erase the screen and the scrollback, cursor home: what `clear` does.
        out.write_all(b"\x1b[2J\x1b[3J\x1b[H")?;
    }
    Ok(())
}

fn now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

/// Runs until interrupted; returns only when watching is impossible (exit status 2).
pub fn run(args: &CheckArgs) -> u8 {
    let (sender, receiver) = mpsc::channel();
    let mut watcher = match notify::recommended_watcher(move |event: notify::Result<Event>| {
        let _ = sender.send(event);
    }) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cannot watch for file changes: {e}");
            return exit::ERROR;
        }
    };
    for path in &args.paths {
        if !path.exists() {
            eprintln!("error: path `{}` does not exist", path.display());
            return exit::ERROR;
        }
        if let Err(e) = watcher.watch(path, RecursiveMode::Recursive) {
            eprintln!("error: cannot watch `{}` for changes: {e}", path.display());
            return exit::ERROR;
        }
    }
    let mut stdout = std::io::stdout();
    let _ = clear_screen(&mut stdout);
    let _ = writeln!(stdout, "[{} UTC] Starting linter in watch mode...", now());
    let _ = stdout.flush();
    run_once(args);
    loop {
        // Wait for a change that matters, then let the burst it belongs to settle.
        let first = match receiver.recv() {
            Ok(event) => event,
            Err(_) => return exit::ERROR,
        };
        let mut changed = matches!(&first, Ok(e) if relevant(e, &args.cache_dir));
        if let Err(e) = &first {
            eprintln!("warning: watching for changes: {e}");
        }
        while let Ok(event) = receiver.recv_timeout(SETTLE) {
            changed |= matches!(&event, Ok(e) if relevant(e, &args.cache_dir));
        }
        if !changed {
            continue;
        }
        let _ = clear_screen(&mut stdout);
        let _ = writeln!(stdout, "[{} UTC] File change detected...", now());
        let _ = stdout.flush();
        run_once(args);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sources_and_configuration_matter() {
        assert!(matters(Path::new("a/train.py")));
        assert!(matters(Path::new("nb.ipynb")));
        assert!(matters(Path::new("x/pyproject.toml")));
        assert!(!matters(Path::new(".memlint_cache/0.1.0/results-0123456789abcdef.pack")));
        assert!(!matters(Path::new("a/.train.py.swp")));
        assert!(!matters(Path::new("README.md")));
        let event = |path: &str| Event::new(EventKind::Create(notify::event::CreateKind::File)).add_path(path.into());
        let cache = Path::new(".memlint_cache");
        assert!(relevant(&event("/w/src/a.py"), cache));
        assert!(!relevant(&event("/w/.memlint_cache/.gitignore"), cache));
        let read = Event::new(EventKind::Access(notify::event::AccessKind::Any)).add_path("/w/a.py".into());
        assert!(!relevant(&read, cache));
    }
}
