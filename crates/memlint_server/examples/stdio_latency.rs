//! Drives `memlint server` as a subprocess over stdio, as an editor does: JSON-RPC with
//! `Content-Length` framing on the server's stdin/stdout, push diagnostics only (the client
//! does not advertise pull diagnostics, so the server publishes `publishDiagnostics` with
//! the document's version).
//!
//! Two modes:
//!
//! - **Latency** (default): for each file, `initialize` / `initialized` / `didOpen`, wait
//!   for the first `publishDiagnostics`, then type: each round sends one incremental
//!   `didChange` inserting one character in the middle of the file (rounds alternate
//!   insert and delete, so the file keeps its size) and measures the time until
//!   `publishDiagnostics` for *that* version arrives. Prints median and p95 per file.
//!   Without `--no-generated` it also generates its inputs: copies of
//!   `tests/examples/train_classifier.py` at 1k, 5k and 20k lines, and a dense 5k-line
//!   file of training and evaluation functions. Each file of copies is also measured with
//!   the character typed on the first indented line after the middle (", in a def"): the
//!   middle of 1k and 20k lines of copies is a module docstring, where an edit is cheap,
//!   while in a definition's body every copy defines the same names again.
//! - **Dump** (`--dump PATH...`): opens every `.py` file under each PATH one by one and
//!   prints each diagnostic the server publishes for it as one JSON line
//!   `{path, code, name, message, severity, line, col, end_line, end_col, fix, evidence}`,
//!   with LSP's 0-based UTF-16 positions converted to the 1-based row and character column
//!   that `memlint check --output-format json` gives (`fix` is shaped like the CLI's:
//!   `{applicability, message, edits: [{content, location: {row, column},
//!   end_location}]}`; `evidence` is the diagnostic's `relatedInformation` as the CLI's
//!   facts with a place: `[{message, location, end_location}]`).
//!   `scripts/compare-engine.sh` compares it with the CLI.
//!
//! ```text
//! cargo build --release -p memlint
//! cargo run --release -p memlint_server --example stdio_latency -- [--memlint PATH]
//!     [--rounds 30] [--warmup 3] [--sizes 1000,5000,20000] [--dense-lines 5000]
//!     [--no-generated] [FILE...]
//! cargo run --release -p memlint_server --example stdio_latency -- [--memlint PATH] --dump DIR...
//! ```
//!
//! `scripts/bench-server.sh [MEMLINT] [FILE...]` builds both and runs the latency mode.
//! `--memlint` defaults to the workspace's `target/release/memlint`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long to wait for any one answer of the server before giving up.
const TIMEOUT: Duration = Duration::from_secs(120);

const USAGE: &str = "\
usage: stdio_latency [--memlint PATH] [--rounds N] [--warmup N] [--sizes L,L,..] [--dense-lines L]
                     [--no-generated] [FILE...]
       stdio_latency [--memlint PATH] --dump PATH...
       stdio_latency --write-dense LINES PATH

Latency mode: one character typed in the middle of each file, time until publishDiagnostics
for that version (median and p95 of --rounds rounds after --warmup rounds; defaults 30 and 3).
Generated inputs: copies of tests/examples/train_classifier.py at --sizes lines (default
1000,5000,20000) and a dense file of training/evaluation functions of --dense-lines lines
(default 5000; 0 leaves it out). --no-generated measures only the FILEs given.

Dump mode: every .py file under each PATH opened in the server, one JSON line per diagnostic
(1-based line/col as `memlint check --output-format json` gives them).

--write-dense: write the dense file of about LINES lines to PATH and exit (for
scripts/bench-output.sh, which times the output formats on it).";

/// When a message of the server had arrived whole (its last byte read), and when this
/// client had parsed it into JSON values: a client's parse is its own cost, which grows
/// with the message (a thousand findings are megabytes), so both are timed.
#[derive(Clone, Copy)]
pub struct Arrival {
    pub read: Instant,
    pub parsed: Instant,
}

/// A message of the server and when it arrived.
type Received = (Arrival, Value);

/// A `memlint server` subprocess and the JSON-RPC connection to it.
pub struct Client {
    child: Child,
    stdin: Arc<Mutex<ChildStdin>>,
    messages: Receiver<Received>,
    /// Messages read while waiting for something else, in order.
    pending: VecDeque<Received>,
    next_id: i64,
}

fn write_message(stdin: &Mutex<ChildStdin>, message: &Value) -> std::io::Result<()> {
    let body = serde_json::to_vec(message).expect("a JSON value serializes");
    let mut stdin = stdin.lock().unwrap_or_else(|e| e.into_inner());
    write!(stdin, "Content-Length: {}\r\n\r\n", body.len())?;
    stdin.write_all(&body)?;
    stdin.flush()
}

/// Reads one framed message; `Ok(None)` at the end of the stream.
fn read_message(reader: &mut impl BufRead) -> Result<Option<(Instant, Value)>, String> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).map_err(|e| format!("reading the server's output: {e}"))? == 0 {
            return Ok(None);
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = Some(value.trim().parse::<usize>().map_err(|e| format!("bad Content-Length {value:?}: {e}"))?);
            }
        }
    }
    let length = length.ok_or("a message of the server has no Content-Length header")?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).map_err(|e| format!("reading a message body of {length} bytes: {e}"))?;
    let read = Instant::now();
    serde_json::from_slice(&body).map(|message| Some((read, message))).map_err(|e| format!("a message of the server is not JSON: {e}"))
}

/// The answer a client gives to a request of the server (it advertises nothing, so these
/// are only the requests every client must answer).
fn answer(request: &Value) -> Value {
    let id = request["id"].clone();
    match request["method"].as_str() {
        Some("workspace/configuration") => {
            let items = request["params"]["items"].as_array().map(|a| a.len()).unwrap_or(0);
            json!({"jsonrpc": "2.0", "id": id, "result": vec![Value::Null; items]})
        }
        _ => json!({"jsonrpc": "2.0", "id": id, "result": Value::Null}),
    }
}

impl Client {
    /// Starts `memlint server` and initializes it (push diagnostics, UTF-16 positions).
    pub fn start(memlint: &Path, root: Option<&Path>) -> Result<Client, String> {
        let mut child = Command::new(memlint)
            .arg("server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start `{} server`: {e}", memlint.display()))?;
        let stdin = Arc::new(Mutex::new(child.stdin.take().expect("stdin is piped")));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (send, messages) = mpsc::channel();
        let reply_to = stdin.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                match read_message(&mut reader) {
                    Ok(Some((read, message))) => {
                        let at = Arrival { read, parsed: Instant::now() };
                        // Requests of the server are answered here, at once, so that it
                        // never waits on the measuring thread.
                        if message.get("method").is_some() && message.get("id").is_some() {
                            let _ = write_message(&reply_to, &answer(&message));
                            continue;
                        }
                        if send.send((at, message)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        eprintln!("stdio_latency: {e}");
                        return;
                    }
                }
            }
        });
        let mut client = Client { child, stdin, messages, pending: VecDeque::new(), next_id: 1 };
        let root_uri = root.map(|r| Value::String(file_uri(r))).unwrap_or(Value::Null);
        let capabilities = json!({
            "general": {"positionEncodings": ["utf-16"]},
            "textDocument": {
                "synchronization": {"didSave": false},
                "publishDiagnostics": {"versionSupport": true},
                "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "source.fixAll"]}}}
            },
            "window": {"workDoneProgress": false}
        });
        let init = client.request("initialize", json!({"processId": std::process::id(), "rootUri": root_uri, "capabilities": capabilities}))?;
        if init["capabilities"].get("diagnosticProvider").map(|v| !v.is_null()).unwrap_or(false) {
            return Err("the server offers pull diagnostics to a push-only client".to_owned());
        }
        client.notify("initialized", json!({}))?;
        Ok(client)
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), String> {
        write_message(&self.stdin, &json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .map_err(|e| format!("writing {method} to the server: {e}"))
    }

    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        write_message(&self.stdin, &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .map_err(|e| format!("writing {method} to the server: {e}"))?;
        let (_, response) = self.wait(&format!("the answer to {method}"), |m| m.get("method").is_none() && m["id"] == json!(id))?;
        if let Some(error) = response.get("error") {
            return Err(format!("{method} failed: {error}"));
        }
        Ok(response["result"].clone())
    }

    /// The first message (read now or earlier) that `wanted` accepts; the others read
    /// before it are dropped.
    pub fn wait(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Result<Received, String> {
        while let Some(message) = self.pending.pop_front() {
            if wanted(&message.1) {
                return Ok(message);
            }
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(message) if wanted(&message.1) => return Ok(message),
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => return Err(format!("no {what} after {} s", TIMEOUT.as_secs())),
                Err(RecvTimeoutError::Disconnected) => return Err(format!("the server exited while this waited for {what}")),
            }
        }
    }

    /// The diagnostics published for `uri` at `version`, and when they arrived.
    pub fn diagnostics(&mut self, uri: &str, version: i64) -> Result<(Arrival, Vec<Value>), String> {
        let (at, mut message) = self.wait(&format!("publishDiagnostics for version {version} of {uri}"), |m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri && m["params"]["version"] == json!(version)
        })?;
        // Taken, not cloned: a copy of a thousand findings would only take the measuring
        // process's time from the server it shares the cores with.
        match message["params"]["diagnostics"].take() {
            Value::Array(diagnostics) => Ok((at, diagnostics)),
            _ => Ok((at, Vec::new())),
        }
    }

    pub fn open(&mut self, uri: &str, text: &str) -> Result<(), String> {
        self.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}))
    }

    pub fn close(&mut self, uri: &str) -> Result<(), String> {
        self.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}))
    }

    /// `shutdown`, `exit`, and the server's exit status.
    pub fn stop(mut self) -> Result<(), String> {
        self.request("shutdown", Value::Null)?;
        self.notify("exit", Value::Null)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("the server exited with {status} after `exit`")),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    let _ = self.child.kill();
                    return Err("the server did not exit within 10 s of `exit`".to_owned());
                }
                Err(e) => return Err(format!("waiting for the server: {e}")),
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `file://` URI for an absolute path (percent-encoding what a URI path cannot hold).
pub fn file_uri(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file://");
    for byte in absolute.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The lines of `text` as LSP counts them (`\n`, `\r\n` and `\r` end a line).
fn lsp_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    lines.push(&text[start..]);
    lines
}

/// An LSP position (0-based line, UTF-16 column) as the CLI's 1-based row and character column.
fn cli_location(lines: &[&str], position: &Value) -> Value {
    let line = position["line"].as_u64().unwrap_or(0) as usize;
    let character = position["character"].as_u64().unwrap_or(0) as usize;
    let text = lines.get(line).copied().unwrap_or("");
    let mut units = 0;
    let mut column = 0;
    for c in text.chars() {
        if units >= character {
            break;
        }
        units += c.len_utf16();
        column += 1;
    }
    json!({"row": line + 1, "column": column + 1})
}

fn severity_name(severity: &Value) -> &'static str {
    match severity.as_u64() {
        Some(1) => "error",
        Some(2) => "warning",
        Some(3) => "info",
        Some(4) => "hint",
        _ => "unknown",
    }
}

/// One published diagnostic as a dump line (see the module documentation).
fn dump_line(path: &str, lines: &[&str], d: &Value) -> Value {
    let start = cli_location(lines, &d["range"]["start"]);
    let end = cli_location(lines, &d["range"]["end"]);
    let fix = match &d["data"]["fix"] {
        Value::Null => Value::Null,
        fix => json!({
            "applicability": fix["applicability"],
            "message": fix["message"],
            "edits": fix["edits"].as_array().map(|edits| edits.iter().map(|e| json!({
                "content": e["newText"],
                "location": cli_location(lines, &e["range"]["start"]),
                "end_location": cli_location(lines, &e["range"]["end"]),
            })).collect::<Vec<_>>()).unwrap_or_default(),
        }),
    };
    // A `.py` file's facts are all in the file itself.
    let evidence: Vec<Value> = d["relatedInformation"]
        .as_array()
        .map(|related| {
            related
                .iter()
                .map(|r| json!({
                    "message": r["message"],
                    "location": cli_location(lines, &r["location"]["range"]["start"]),
                    "end_location": cli_location(lines, &r["location"]["range"]["end"]),
                }))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "path": path,
        "code": d["code"],
        "name": d["data"]["name"],
        "message": d["message"],
        "severity": severity_name(&d["severity"]),
        "line": start["row"], "col": start["column"],
        "end_line": end["row"], "end_col": end["column"],
        "fix": fix,
        "evidence": evidence,
    })
}

/// The `.py` files under `path` (or `path` itself), sorted; hidden folders, `__pycache__`
/// and `site-packages` are skipped as `memlint check` skips them.
fn python_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let entries = std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for entry in entries {
        let name = entry.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if entry.is_dir() {
            if !name.starts_with('.') && name != "__pycache__" && name != "site-packages" {
                python_files(&entry, out)?;
            }
        } else if name.ends_with(".py") {
            out.push(entry);
        }
    }
    Ok(())
}

/// Dump mode: every file's diagnostics as JSON lines on `out`; returns (files, diagnostics).
pub fn dump(memlint: &Path, paths: &[PathBuf], out: &mut impl Write) -> Result<(usize, usize), String> {
    let mut files = Vec::new();
    for path in paths {
        if !path.exists() {
            return Err(format!("{}: no such file or folder", path.display()));
        }
        python_files(path, &mut files)?;
    }
    let root = paths.first().filter(|p| p.is_dir()).map(PathBuf::as_path);
    let mut client = Client::start(memlint, root)?;
    let mut count = 0;
    for file in &files {
        let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let Ok(text) = String::from_utf8(bytes) else {
            eprintln!("stdio_latency: {}: not UTF-8, left out", file.display());
            continue;
        };
        let uri = file_uri(file);
        client.open(&uri, &text)?;
        let (_, diagnostics) = client.diagnostics(&uri, 1)?;
        client.close(&uri)?;
        let lines = lsp_lines(&text);
        let path = file.display().to_string();
        for d in &diagnostics {
            writeln!(out, "{}", dump_line(&path, &lines, d)).map_err(|e| format!("writing the dump: {e}"))?;
            count += 1;
        }
    }
    client.stop()?;
    Ok((files.len(), count))
}

/// Where a character is typed: a 0-based line and UTF-16 column inside a word on the
/// first line at or after the middle of the file that has a word of 3 or more letters;
/// `indented`: the first such line that is indented and no definition's header (in the
/// body of a definition: the middle of a file of copies may fall on a module docstring,
/// where an edit is cheap),
/// inside a word that is no keyword (a letter typed into `return` or `def` is a syntax
/// error; into a name, a rename).
fn typing_position(text: &str, indented: bool) -> Option<(usize, usize)> {
    let lines = lsp_lines(text);
    let middle = lines.len() / 2;
    (middle..lines.len()).chain(0..middle).find_map(|n| {
        let line = lines[n];
        let header = ["def ", "async def ", "class ", "@"].iter().any(|h| line.trim_start().starts_with(h));
        if indented && (!line.starts_with([' ', '\t']) || header) {
            return None;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i].is_ascii_alphabetic() || chars[i] == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if i - start >= 3 && !(indented && memlint_python::KEYWORDS.contains(&word.as_str())) {
                    let column: usize = chars[..start + 1].iter().map(|c| c.len_utf16()).sum();
                    return Some((n, column));
                }
            } else {
                i += 1;
            }
        }
        None
    })
}

pub struct Latency {
    pub lines: usize,
    pub findings: usize,
    pub open: Duration,
    /// Until each round's publish was read whole; sorted.
    pub rounds: Vec<Duration>,
    /// Until it was also parsed by this client; sorted.
    pub parsed: Vec<Duration>,
}

/// Nearest-rank percentile of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn median(sorted: &[Duration]) -> Duration {
    match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

/// Latency mode for one file: open it, then `warmup + rounds` one-character edits (on an
/// indented line: see [`typing_position`]).
pub fn measure(memlint: &Path, file: &Path, text: &str, indented: bool, warmup: usize, rounds: usize) -> Result<Latency, String> {
    let (line, column) = typing_position(text, indented).ok_or_else(|| format!("{}: no word to type into", file.display()))?;
    let mut client = Client::start(memlint, file.parent())?;
    let uri = file_uri(file);
    let opened = Instant::now();
    client.open(&uri, text)?;
    let (at, diagnostics) = client.diagnostics(&uri, 1)?;
    let open = at.read - opened;
    let mut version = 1;
    let mut inserted = false;
    let mut times = Vec::with_capacity(rounds);
    let mut parsed = Vec::with_capacity(rounds);
    for round in 0..warmup + rounds {
        version += 1;
        let position = json!({"line": line, "character": column});
        let change = if inserted {
            json!({"range": {"start": position, "end": {"line": line, "character": column + 1}}, "rangeLength": 1, "text": ""})
        } else {
            json!({"range": {"start": position, "end": position}, "rangeLength": 0, "text": "x"})
        };
        inserted = !inserted;
        let sent = Instant::now();
        client.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}))?;
        let (at, _) = client.diagnostics(&uri, version)?;
        if round >= warmup {
            times.push(at.read - sent);
            parsed.push(at.parsed - sent);
        }
    }
    client.stop()?;
    times.sort();
    parsed.sort();
    Ok(Latency { lines: lsp_lines(text).len(), findings: diagnostics.len(), open, rounds: times, parsed })
}

/// Copies of `example` until the text has at least `lines` lines.
pub fn copies(example: &str, lines: usize) -> String {
    let per_copy = example.lines().count().max(1);
    let n = lines.div_ceil(per_copy);
    example.repeat(n)
}

/// One block of the dense file: training and evaluation functions with the anti-patterns
/// memlint finds (a loss summed across steps, `empty_cache()` in the loop, evaluation
/// without `no_grad`, predictions kept on the GPU, `torch.load` without `map_location`).
const DENSE_BLOCK: &str = r#"

def train_{i}(model, loader, optimizer, device):
    model.train()
    total = 0
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss
        torch.cuda.empty_cache()
    return total


def evaluate_{i}(model, loader, device):
    model.eval()
    predictions = []
    for inputs, _ in loader:
        outputs = model(inputs.to(device))
        predictions.append(outputs)
    state = torch.load("checkpoint_{i}.pt")
    return predictions, state
"#;

/// A dense file of about `lines` lines: one training and one evaluation function per
/// block, distinct names.
pub fn dense(lines: usize) -> String {
    let mut text = String::from("import torch\nimport torch.nn.functional as F\n");
    let mut count = 2;
    let mut i = 0;
    let block_lines = DENSE_BLOCK.lines().count();
    while count < lines {
        text.push_str(&DENSE_BLOCK.replace("{i}", &i.to_string()));
        count += block_lines;
        i += 1;
    }
    text
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Options {
    memlint: PathBuf,
    rounds: usize,
    warmup: usize,
    sizes: Vec<usize>,
    dense_lines: usize,
    generated: bool,
    dump: bool,
    write_dense: Option<(usize, PathBuf)>,
    paths: Vec<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut options = Options {
        memlint: workspace.join("target/release/memlint"),
        rounds: 30,
        warmup: 3,
        sizes: vec![1000, 5000, 20000],
        dense_lines: 5000,
        generated: true,
        dump: false,
        write_dense: None,
        paths: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    let number = |flag: &str, value: Option<String>| -> Result<usize, String> {
        let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
        value.parse().map_err(|_| format!("{flag}: `{value}` is not a whole number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--memlint" => options.memlint = PathBuf::from(args.next().ok_or("--memlint needs a path")?),
            "--rounds" => options.rounds = number("--rounds", args.next())?,
            "--warmup" => options.warmup = number("--warmup", args.next())?,
            "--dense-lines" => options.dense_lines = number("--dense-lines", args.next())?,
            "--sizes" => {
                let value = args.next().ok_or("--sizes needs a comma-separated list of line counts")?;
                options.sizes = if value.is_empty() {
                    Vec::new()
                } else {
                    value.split(',').map(|s| number("--sizes", Some(s.trim().to_owned()))).collect::<Result<_, _>>()?
                };
            }
            "--no-generated" => options.generated = false,
            "--dump" => options.dump = true,
            "--write-dense" => {
                let lines = number("--write-dense", args.next())?;
                let path = args.next().ok_or("--write-dense needs LINES and a PATH")?;
                options.write_dense = Some((lines, PathBuf::from(path)));
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}\n\n{USAGE}")),
            path => options.paths.push(PathBuf::from(path)),
        }
    }
    if options.write_dense.is_some() {
        return Ok(options);
    }
    if options.rounds == 0 {
        return Err("--rounds must be at least 1".to_owned());
    }
    if !options.memlint.is_file() {
        return Err(format!(
            "{}: no memlint binary there (build it with `cargo build --release -p memlint`, or pass --memlint PATH)",
            options.memlint.display()
        ));
    }
    if options.dump && options.paths.is_empty() {
        return Err("--dump needs at least one file or folder".to_owned());
    }
    Ok(options)
}

fn run() -> Result<(), String> {
    let options = parse_args()?;
    if let Some((lines, path)) = &options.write_dense {
        return std::fs::write(path, dense(*lines)).map_err(|e| format!("{}: {e}", path.display()));
    }
    if options.dump {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let (files, diagnostics) = dump(&options.memlint, &options.paths, &mut out)?;
        out.flush().map_err(|e| format!("writing the dump: {e}"))?;
        eprintln!("stdio_latency: {files} files, {diagnostics} diagnostics");
        return Ok(());
    }
    // (label, file, text, typed on an indented line)
    let mut inputs: Vec<(String, PathBuf, String, bool)> = Vec::new();
    let scratch = std::env::temp_dir().join(format!("memlint-stdio-latency-{}", std::process::id()));
    if options.generated {
        let example_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/examples/train_classifier.py");
        let example = std::fs::read_to_string(&example_path).map_err(|e| format!("{}: {e}", example_path.display()))?;
        std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
        let mut generated: Vec<(String, String)> =
            options.sizes.iter().map(|&n| (format!("train_classifier x{}k", n as f64 / 1000.0), copies(&example, n))).collect();
        if options.dense_lines > 0 {
            generated.push((format!("dense {}k", options.dense_lines as f64 / 1000.0), dense(options.dense_lines)));
        }
        for (i, (label, text)) in generated.into_iter().enumerate() {
            let path = scratch.join(format!("generated_{i}.py"));
            std::fs::write(&path, &text).map_err(|e| format!("{}: {e}", path.display()))?;
            // Copies of one script define every name again and again, and their middle may
            // fall on a module docstring: also typed in the body of a definition.
            let in_def = label.starts_with("train_classifier").then(|| (format!("{label}, in a def"), path.clone(), text.clone(), true));
            inputs.push((label, path, text, false));
            inputs.extend(in_def);
        }
    }
    for path in &options.paths {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        inputs.push((path.display().to_string(), path.clone(), text, false));
    }
    if inputs.is_empty() {
        return Err("nothing to measure: --no-generated and no FILE".to_owned());
    }
    println!(
        "memlint server over stdio ({}): one character typed in the middle of the file (\", in a def\": on the first indented line after it), until publishDiagnostics for that version is read whole (p95 parsed: and parsed by this client into JSON values); {} rounds after {} warm-up",
        options.memlint.display(),
        options.rounds,
        options.warmup
    );
    println!(
        "{:<40} {:>7} {:>8} {:>9} {:>10} {:>10} {:>10} {:>10} {:>14}",
        "file", "lines", "findings", "open ms", "median ms", "p95 ms", "min ms", "max ms", "p95 parsed ms"
    );
    let mut failed = None;
    for (label, path, text, indented) in &inputs {
        match measure(&options.memlint, path, text, *indented, options.warmup, options.rounds) {
            Ok(l) => println!(
                "{:<40} {:>7} {:>8} {:>9.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>14.1}",
                label,
                l.lines,
                l.findings,
                ms(l.open),
                ms(median(&l.rounds)),
                ms(percentile(&l.rounds, 95.0)),
                ms(l.rounds[0]),
                ms(*l.rounds.last().expect("at least one round")),
                ms(percentile(&l.parsed, 95.0))
            ),
            Err(e) => {
                eprintln!("stdio_latency: {label}: {e}");
                failed = Some(e);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[allow(dead_code)] // `main` is unused where a test includes this file as a module.
fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
