//! A small LSP client for driving the real server in-process over `tokio::io::duplex`:
//! it frames JSON-RPC messages, answers the server's own requests, and keeps what the
//! server sent until a test asks for it. Shared by the protocol tests and the benchmark.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

/// How long a test waits for one message before failing.
pub const TIMEOUT: Duration = Duration::from_secs(20);

pub struct TestClient {
    reader: BufReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
    next_id: i64,
    /// Messages from the server that no test has taken yet, in arrival order.
    pub inbox: VecDeque<Value>,
    server: tokio::task::JoinHandle<()>,
}

impl TestClient {
    /// Starts the real server (`memlint_server::service`) on an in-memory pipe.
    pub fn start() -> TestClient {
        TestClient::start_with(memlint_server::Options::default())
    }

    /// [`TestClient::start`] with the server's `options`.
    pub fn start_with(options: memlint_server::Options) -> TestClient {
        let (client_end, server_end) = tokio::io::duplex(1 << 22);
        let (server_read, server_write) = tokio::io::split(server_end);
        let server = tokio::spawn(memlint_server::serve_with(server_read, server_write, options));
        let (read, writer) = tokio::io::split(client_end);
        TestClient { reader: BufReader::new(read), writer, next_id: 1, inbox: VecDeque::new(), server }
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string()).await;
    }

    pub async fn send_raw(&mut self, body: &str) {
        let framed = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.writer.write_all(framed.as_bytes()).await.expect("server end is open");
        self.writer.flush().await.expect("flush");
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.expect("server end is open");
        self.writer.flush().await.expect("flush");
    }

    async fn read_message(&mut self) -> Value {
        let mut length = None;
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).await.expect("read header");
            assert!(n > 0, "the server closed the connection");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length: ") {
                length = Some(value.parse::<usize>().expect("numeric Content-Length"));
            }
        }
        let mut body = vec![0; length.expect("a Content-Length header")];
        self.reader.read_exact(&mut body).await.expect("read body");
        serde_json::from_slice(&body).expect("the server sends JSON")
    }

    /// Reads one message, answering it first if it is a request from the server.
    async fn pump(&mut self) -> Value {
        let message = tokio::time::timeout(TIMEOUT, self.read_message()).await.expect("a message from the server in time");
        if let (Some(id), Some(_)) = (message.get("id"), message.get("method")) {
            let reply = json!({"jsonrpc": "2.0", "id": id, "result": null});
            self.send(&reply).await;
        }
        message
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    /// Sends a request and returns the whole response message (`result` or `error`).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        loop {
            let message = self.pump().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            self.inbox.push_back(message);
        }
    }

    /// The next message with this method (already received, or arriving within the timeout).
    pub async fn expect(&mut self, method: &str) -> Value {
        if let Some(i) = self.inbox.iter().position(|m| m["method"] == method) {
            return self.inbox.remove(i).expect("index from position");
        }
        loop {
            let message = self.pump().await;
            if message["method"] == method {
                return message;
            }
            self.inbox.push_back(message);
        }
    }

    /// The next `publishDiagnostics` for `uri`.
    pub async fn diagnostics_for(&mut self, uri: &str) -> Value {
        loop {
            let message = self.expect("textDocument/publishDiagnostics").await;
            if message["params"]["uri"] == uri {
                return message;
            }
        }
    }

    /// Messages with this method received so far (after a request round trip, nothing
    /// sent before that request is still in flight).
    pub fn taken(&mut self, method: &str) -> Vec<Value> {
        let (matching, rest): (Vec<Value>, Vec<Value>) = self.inbox.drain(..).partition(|m| m["method"] == method);
        self.inbox = rest.into();
        matching
    }

    /// `initialize` + `initialized`; returns the `initialize` response.
    pub async fn initialize(&mut self, capabilities: Value, options: Value, root: Option<&str>) -> Value {
        let mut params = json!({"processId": null, "capabilities": capabilities, "initializationOptions": options});
        if let Some(root) = root {
            params["rootUri"] = json!(root);
            params["workspaceFolders"] = json!([{"uri": root, "name": "root"}]);
        }
        let response = self.request("initialize", params).await;
        self.notify("initialized", json!({})).await;
        response
    }

    pub async fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}),
        )
        .await;
    }

    pub async fn change(&mut self, uri: &str, version: i32, changes: Value) {
        self.notify("textDocument/didChange", json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": changes}))
            .await;
    }

    /// `shutdown` then `exit`; the server task must finish.
    pub async fn shutdown(mut self) -> Value {
        let response = self.request("shutdown", Value::Null).await;
        self.notify("exit", Value::Null).await;
        tokio::time::timeout(TIMEOUT, self.server).await.expect("the server stops after exit").expect("no panic");
        response
    }
}

/// Client capabilities of a plain push-diagnostics client that counts in UTF-16.
pub fn push_client() -> Value {
    json!({"textDocument": {"publishDiagnostics": {"versionSupport": true}}})
}

/// A client that offers UTF-8, pulls diagnostics and resolves code action edits lazily.
pub fn pull_client() -> Value {
    json!({
        "general": {"positionEncodings": ["utf-8", "utf-16"]},
        "textDocument": {
            "diagnostic": {"dynamicRegistration": false},
            "codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": true}
        },
        "workspace": {"diagnostics": {"refreshSupport": true}, "didChangeWatchedFiles": {"dynamicRegistration": true}}
    })
}

/// Applies LSP text edits (UTF-16 or UTF-8 columns) to a text, as an editor would.
pub fn apply_text_edits(text: &str, edits: &[Value], utf8: bool) -> String {
    let index = memlint_linter::LineIndex::new(text);
    let offset = |p: &Value| {
        let (line, col) = (p["line"].as_u64().unwrap() as u32, p["character"].as_u64().unwrap() as u32);
        if utf8 {
            index.offset_from_utf8(line, col, text)
        } else {
            index.offset_from_utf16(line, col, text)
        }
    };
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| (offset(&e["range"]["start"]), offset(&e["range"]["end"]), e["newText"].as_str().unwrap().to_owned()))
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_owned();
    for (start, end, new) in spans {
        out.replace_range(start..end, &new);
    }
    out
}
