//! memlint's language server. Only this crate knows LSP types.
//!
//! The server keeps every open document's text, tree-sitter tree and line index in step
//! with the client's incremental edits, lints off the async threads, drops results for
//! versions the client has already moved past, and never lets a panic in a rule take the
//! server down (each lint runs under `catch_unwind`).

mod actions;
mod document;
mod hover;
mod notebook;
mod server;
mod settings;

pub use server::Server;
pub use tower_lsp_server::{ClientSocket, LspService};

/// The service for in-process use (tests, the latency benchmark) or any transport.
pub fn service() -> (LspService<Server>, ClientSocket) {
    LspService::new(Server::new)
}

/// Serves LSP over standard input and output until the client exits; returns the exit status.
pub fn run_stdio() -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("memlint server: cannot start the async runtime: {e}");
            return 2;
        }
    };
    runtime.block_on(async {
        let (service, socket) = service();
        tower_lsp_server::Server::new(tokio::io::stdin(), tokio::io::stdout(), socket).serve(service).await;
    });
    // Do not wait for lint jobs still running for a client that has gone.
    runtime.shutdown_background();
    0
}
