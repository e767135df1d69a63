//! memlint's language server. Only this crate knows LSP types.
//!
//! The server keeps every open document's text, tree-sitter tree and line index in step
//! with the client's incremental edits, lints off the async threads, drops results for
//! versions the client has already moved past, and never lets a panic in a rule take the
//! server down (each lint runs under `catch_unwind`).

mod actions;
mod background;
mod document;
mod hover;
pub mod incremental;
mod notebook;
mod published;
mod server;
mod settings;
mod workspace;

pub use server::Server;
pub use tower_lsp_server::ClientSocket;

use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use serde_json::Value;
use tower_lsp_server::jsonrpc::{Request, Response};
use tower_lsp_server::lsp_types::{self as lsp, MessageType};
use tower_lsp_server::{Client, ExitedError, LspService};

/// The server as a tower service: [`LspService`] with a look at each message first.
///
/// tower-lsp-server drops a notification whose params do not deserialize without a word;
/// this logs it to the client instead, so a broken client is visible. It also reads
/// `workspace.diagnostics.refreshSupport` from the raw `initialize` params, because
/// lsp-types 0.97 looks for it under the misspelt key `diagnostic`.
pub struct Service {
    inner: LspService<Server>,
    client: Client,
}

/// How the server is run (the `memlint` binary passes its build identity).
#[derive(Clone, Debug)]
pub struct Options {
    /// The build identity of the linter (as `memlint check` caches under): with it, a
    /// workspace whose cache folder exists (`.memlint_cache`, or `MEMLINT_CACHE_DIR`) has
    /// its module summaries read from and written to that folder's summary store, shared
    /// with `memlint check`. The server never creates a cache folder of its own.
    pub summary_build: Option<String>,
    /// After an edit, a file whose last complete lint took at least this long gets a
    /// predicted answer first (see [`incremental`]); a faster one is only linted whole.
    /// Default [`PREDICT_AFTER`].
    pub predict_after: std::time::Duration,
}

/// Below this, a complete lint answers a keystroke about as fast as a prediction would,
/// and a prediction would double the work.
pub const PREDICT_AFTER: std::time::Duration = std::time::Duration::from_millis(10);

impl Default for Options {
    fn default() -> Options {
        Options { summary_build: None, predict_after: PREDICT_AFTER }
    }
}

/// The service for in-process use (tests, the latency benchmark) or any transport.
pub fn service() -> (Service, ClientSocket) {
    service_with(Options::default())
}

/// [`service`] with `options`.
pub fn service_with(options: Options) -> (Service, ClientSocket) {
    service_writing(options, None)
}

fn service_writing(options: Options, direct_output: Option<DirectOutput>) -> (Service, ClientSocket) {
    let mut client = None;
    let (inner, socket) = LspService::build(|c| {
        client = Some(c.clone());
        Server::with_output(c, options, direct_output)
    })
    .custom_method(MALFORMED, Server::malformed_message)
    .finish();
    let client = client.expect("LspService::new calls its init closure");
    (Service { inner, client }, socket)
}

fn check<T: DeserializeOwned>(params: Option<&Value>) -> Option<String> {
    serde_json::from_value::<T>(params.cloned().unwrap_or(Value::Null)).err().map(|e| e.to_string())
}

impl Service {
    fn inspect(&self, request: &Request) {
        let params = request.params();
        if request.method() == "initialize" {
            let refresh = params
                .and_then(|p| p.pointer("/capabilities/workspace/diagnostics/refreshSupport"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            self.inner.inner().raw_refresh_support.store(refresh, Ordering::SeqCst);
            return;
        }
        if request.id().is_some() {
            // Requests with bad params get an InvalidParams error from tower-lsp-server.
            return;
        }
        let problem = match request.method() {
            "textDocument/didOpen" => check::<lsp::DidOpenTextDocumentParams>(params),
            "textDocument/didChange" => check::<lsp::DidChangeTextDocumentParams>(params),
            "textDocument/didClose" => check::<lsp::DidCloseTextDocumentParams>(params),
            "notebookDocument/didOpen" => check::<lsp::DidOpenNotebookDocumentParams>(params),
            "notebookDocument/didChange" => check::<lsp::DidChangeNotebookDocumentParams>(params),
            "notebookDocument/didClose" => check::<lsp::DidCloseNotebookDocumentParams>(params),
            "workspace/didChangeConfiguration" => check::<lsp::DidChangeConfigurationParams>(params),
            "workspace/didChangeWatchedFiles" => check::<lsp::DidChangeWatchedFilesParams>(params),
            _ => None,
        };
        if let Some(problem) = problem {
            let client = self.client.clone();
            let message = format!("memlint: ignored `{}` with malformed params: {problem}", request.method());
            tokio::spawn(async move { client.log_message(MessageType::ERROR, message).await });
        }
    }
}

impl tower_service::Service<Request> for Service {
    type Response = Option<Response>;
    type Error = ExitedError;
    type Future = <LspService<Server> as tower_service::Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.inspect(&request);
        self.inner.call(request)
    }
}

/// What the input filter sends the server in place of a message it cannot pass on.
const MALFORMED: &str = "memlint/malformedMessage";

/// Serves LSP on `input`/`output` until the client sends `exit` or closes `input`.
///
/// Messages pass through [`filter_input`] first: tower-lsp-server's reader stops for good
/// at the first message that is not JSON-RPC (tokio-util's `FramedRead` ends its stream
/// after a decoding error), which would kill the server on one bad message.
pub async fn serve<I, O>(input: I, output: O)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    serve_with(input, output, Options::default()).await
}

/// [`serve`] with `options`.
pub async fn serve_with<I, O>(input: I, output: O, options: Options)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (filtered, server_input) = tokio::io::duplex(1 << 20);
    let filter = tokio::spawn(filter_input(input, filtered));
    // tower-lsp-server's messages and the server's own (see `DirectOutput`) meet in one
    // queue, each whole, and one task writes them out.
    let (server_output, from_server) = tokio::io::duplex(1 << 20);
    let (queue, queued) = tokio::sync::mpsc::unbounded_channel();
    let writer = tokio::spawn(write_output(queued, output));
    let reader = tokio::spawn(read_messages(from_server, queue.clone()));
    let (service, socket) = service_writing(options, Some(DirectOutput(queue)));
    tower_lsp_server::Server::new(server_input, server_output, socket).serve(service).await;
    // tower-lsp-server's output is closed now: the reader passes on its last messages and
    // tells the writer to finish.
    let _ = reader.await;
    let _ = writer.await;
    // After `exit` the filter may still be waiting on a client that keeps its end open.
    filter.abort();
}

/// A message for the client, whole: its JSON body, or the end of the output.
enum Outgoing {
    Message(Vec<u8>),
    End,
}

/// The server's own way to the client's input, beside tower-lsp-server's.
#[derive(Clone)]
pub(crate) struct DirectOutput(tokio::sync::mpsc::UnboundedSender<Outgoing>);

impl DirectOutput {
    /// Sends a notification serialized straight from `params`, which take about `size`
    /// bytes (a buffer that grows copies what it holds, and touches fresh pages).
    pub(crate) fn notify<P: serde::Serialize>(&self, method: &str, params: &P, size: usize) {
        #[derive(serde::Serialize)]
        struct Notification<'a, P> {
            jsonrpc: &'static str,
            method: &'a str,
            params: &'a P,
        }
        let mut body = Vec::with_capacity(size + method.len() + 64);
        match serde_json::to_writer(&mut body, &Notification { jsonrpc: "2.0", method, params }) {
            Ok(()) => {
                // Fails only once the writer is gone: the client has exited.
                let _ = self.0.send(Outgoing::Message(body));
            }
            Err(e) => eprintln!("memlint server: `{method}` could not be serialized: {e}"),
        }
    }
}

/// Reads tower-lsp-server's framed messages and queues each whole; queues the end when
/// its output closes.
async fn read_messages<I: AsyncRead + Unpin>(input: I, queue: tokio::sync::mpsc::UnboundedSender<Outgoing>) {
    let mut reader = BufReader::new(input);
    loop {
        let mut length = None;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line).await {
                Ok(0) | Err(_) => {
                    let _ = queue.send(Outgoing::End);
                    return;
                }
                Ok(_) => {}
            }
            let line = line.trim();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        // tower-lsp-server always writes a Content-Length.
        let Some(length) = length else { continue };
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            let _ = queue.send(Outgoing::End);
            return;
        }
        let _ = queue.send(Outgoing::Message(body));
    }
}

/// Writes each queued message, framed, to `output` until the end is queued (what was queued
/// before it is written) or the client stops reading.
async fn write_output<O: AsyncWrite + Unpin>(mut queued: tokio::sync::mpsc::UnboundedReceiver<Outgoing>, mut output: O) {
    while let Some(Outgoing::Message(body)) = queued.recv().await {
        let header = format!("Content-Length: {}\r\n\r\n", body.len());
        if output.write_all(header.as_bytes()).await.is_err() || output.write_all(&body).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

/// Copies framed messages from `input` to `output`, replacing each one that is not a
/// JSON-RPC message (bad JSON, bad or missing `Content-Length`) by a `memlint/malformedMessage`
/// notification, which the server logs. Ends when `input` does.
pub async fn filter_input<I: AsyncRead + Unpin, O: AsyncWrite + Unpin>(input: I, mut output: O) {
    let mut reader = BufReader::new(input);
    loop {
        let mut length: Option<Result<usize, String>> = None;
        let mut in_headers = false;
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&line);
            let line = line.trim();
            if line.is_empty() {
                if in_headers {
                    break;
                }
                continue;
            }
            in_headers = true;
            if let Some((name, value)) = line.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse().map_err(|_| format!("bad Content-Length `{}`", value.trim())));
                }
            }
        }
        let body = match length {
            Some(Ok(length)) => {
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).await.is_err() {
                    return;
                }
                match jsonrpc_problem(&body) {
                    None => body,
                    Some(problem) => malformed(&problem),
                }
            }
            Some(Err(problem)) => malformed(&problem),
            None => malformed("a message without a Content-Length header"),
        };
        let header = format!("Content-Length: {}\r\n\r\n", body.len());
        if output.write_all(header.as_bytes()).await.is_err() || output.write_all(&body).await.is_err() {
            return;
        }
        let _ = output.flush().await;
    }
}

/// Why `body` is not a JSON-RPC request, notification or response, if it is not.
fn jsonrpc_problem(body: &[u8]) -> Option<String> {
    if serde_json::from_slice::<Request>(body).is_ok() || serde_json::from_slice::<Response>(body).is_ok() {
        return None;
    }
    Some(match serde_json::from_slice::<Value>(body) {
        Err(e) => format!("a message that is not JSON ({e})"),
        Ok(_) => "a JSON message that is not JSON-RPC 2.0".to_owned(),
    })
}

fn malformed(problem: &str) -> Vec<u8> {
    serde_json::json!({"jsonrpc": "2.0", "method": MALFORMED, "params": {"problem": problem}}).to_string().into_bytes()
}

/// Serves LSP over standard input and output until the client exits; returns the exit status.
pub fn run_stdio(options: Options) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("memlint server: cannot start the async runtime: {e}");
            return 2;
        }
    };
    runtime.block_on(serve_with(tokio::io::stdin(), tokio::io::stdout(), options));
    // Do not wait for lint jobs still running for a client that has gone.
    runtime.shutdown_background();
    0
}
