//! The server's workspace project: an open file is linted with the modules it imports
//! from the workspace (as `memlint check` lints it), and is linted again when one of
//! them is saved or changes on disk.

mod common;

use common::{pull_client, push_client, TestClient};
use memlint_linter::{lint, lint_in_project, LineIndex, LinterSettings};
use memlint_python::ProjectResolver;
use serde_json::{json, Value};

// Nothing in preview.py says `g` is a network (no `.eval()`, a name that says nothing):
// only models.py does.
const MODELS: &str = "import torch.nn as nn\n\n\nclass Synth(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.body = nn.Linear(8, 8)\n\n    def forward(self, z):\n        return self.body(z)\n";
const PREVIEW: &str = "from models import Synth\n\n\ndef show(loader):\n    g = Synth()\n    for z in loader:\n        print(g(z))\n";

fn codes_and_ranges(publish: &Value) -> Vec<(String, Value)> {
    publish["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_owned(), d["range"].clone()))
        .collect()
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf, String) {
    workspace_with(MODELS)
}

/// A fresh workspace of `models` (as models.py) and preview.py: the folder, its path and URI.
fn workspace_with(models: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("models.py"), models).unwrap();
    std::fs::write(root.join("preview.py"), PREVIEW).unwrap();
    let root_uri = format!("file://{}", root.display());
    (dir, root, root_uri)
}

#[tokio::test]
async fn the_server_reports_what_the_cli_reports_on_a_two_file_project() {
    let (_dir, root, root_uri) = workspace();
    // What `memlint check` computes for preview.py: the same entry point over the same project.
    let project = memlint_project::Project::new(Vec::new(), vec![root.join("models.py"), root.join("preview.py")]);
    let resolver = ProjectResolver::new(&project, memlint_project::Project::key(&root.join("preview.py")));
    let expected = lint_in_project(PREVIEW, &LinterSettings::default(), &resolver);
    assert!(!expected.diagnostics.is_empty(), "the project makes `g` a network");
    assert!(lint(PREVIEW, &LinterSettings::default()).diagnostics.is_empty(), "alone, preview.py has no finding");
    let index = LineIndex::new(PREVIEW);
    let expected: Vec<(String, Value)> = expected
        .diagnostics
        .iter()
        .map(|d| {
            let (sl, sc) = index.utf16_position(d.range.start, PREVIEW);
            let (el, ec) = index.utf16_position(d.range.end, PREVIEW);
            (d.rule.code().to_owned(), json!({"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}))
        })
        .collect();

    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, Some(&root_uri)).await;
    let uri = format!("{root_uri}/preview.py");
    client.open(&uri, PREVIEW).await;
    assert_eq!(codes_and_ranges(&client.diagnostics_for(&uri).await), expected);
    client.shutdown().await;
}

#[tokio::test]
async fn a_saved_or_changed_module_relints_the_open_files_that_import_it() {
    let (_dir, root, root_uri) = workspace();
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, Some(&root_uri)).await;
    let uri = format!("{root_uri}/preview.py");
    let models_uri = format!("{root_uri}/models.py");
    client.open(&uri, PREVIEW).await;
    let first = codes_and_ranges(&client.diagnostics_for(&uri).await);
    assert_eq!(first.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["MEM001"]);

    // models.py saved (by the editor, not open here): Synth is no network any more.
    std::fs::write(root.join("models.py"), MODELS.replace("(nn.Module)", "")).unwrap();
    client.notify("textDocument/didSave", json!({"textDocument": {"uri": models_uri}})).await;
    assert!(codes_and_ranges(&client.diagnostics_for(&uri).await).is_empty(), "re-linted after the save");

    // Changed back on disk by another program: the watcher's notification re-lints it.
    std::fs::write(root.join("models.py"), MODELS).unwrap();
    client.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": models_uri, "type": 2}]})).await;
    assert_eq!(codes_and_ranges(&client.diagnostics_for(&uri).await), first);
    client.shutdown().await;
}

#[tokio::test]
async fn a_file_that_starts_calling_an_open_files_function_relints_it() {
    // evaluation.py's `score` is reported while nothing calls it; then main.py, which said
    // nothing of it (so no lint read it), calls it under `no_grad()` and is saved.
    const EVALUATION: &str = "def score(net, loader):\n    net.eval()\n    hits = 0\n    for x, y in loader:\n        out = net(x)\n        hits += (out.argmax(1) == y).sum().item()\n    return hits\n";
    const MAIN: &str = "import torch\n\nfrom evaluation import score\n\n\ndef main(net, val_loader):\n    with torch.no_grad():\n        print(score(net, val_loader))\n";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("evaluation.py"), EVALUATION).unwrap();
    std::fs::write(root.join("main.py"), "def main():\n    print('hello')\n").unwrap();
    let root_uri = format!("file://{}", root.display());
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, Some(&root_uri)).await;
    let uri = format!("{root_uri}/evaluation.py");
    client.open(&uri, EVALUATION).await;
    let first = codes_and_ranges(&client.diagnostics_for(&uri).await);
    assert_eq!(first.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["MEM001"]);
    std::fs::write(root.join("main.py"), MAIN).unwrap();
    client.notify("workspace/didChangeWatchedFiles", json!({"changes": [{"uri": format!("{root_uri}/main.py"), "type": 2}]})).await;
    assert!(codes_and_ranges(&client.diagnostics_for(&uri).await).is_empty(), "re-linted: main.py calls score under no_grad");
    client.shutdown().await;
}

#[tokio::test]
async fn python_files_are_watched_when_the_client_registers_watchers_dynamically() {
    let mut client = TestClient::start();
    client.initialize(pull_client(), Value::Null, None).await;
    let mut globs = Vec::new();
    for _ in 0..2 {
        let registration = client.expect("client/registerCapability").await;
        for r in registration["params"]["registrations"].as_array().unwrap() {
            assert_eq!(r["method"], "workspace/didChangeWatchedFiles");
            for w in r["registerOptions"]["watchers"].as_array().unwrap() {
                globs.push(w["globPattern"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(globs.iter().any(|g| g == "**/*.py"), "{globs:?}");
    assert!(globs.iter().any(|g| g == "**/pyproject.toml"), "{globs:?}");
}

/// The entry of the summary store under `dir` for a module of text `text` (entries are
/// named by their module's content hash), if there is one.
fn summary_entry(dir: &std::path::Path, text: &str) -> Option<std::path::PathBuf> {
    let name = format!("{}.summary", memlint_project::Project::hash_text(text.as_bytes()));
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n.to_string_lossy() == name) {
                return Some(path);
            }
        }
    }
    None
}

async fn diagnostics_of_preview(root_uri: &str, build: &str) -> Vec<(String, Value)> {
    let mut client = TestClient::start_with(memlint_server::Options { summary_build: Some(build.to_owned()), ..Default::default() });
    client.initialize(push_client(), Value::Null, Some(root_uri)).await;
    let uri = format!("{root_uri}/preview.py");
    client.open(&uri, PREVIEW).await;
    let found = codes_and_ranges(&client.diagnostics_for(&uri).await);
    client.shutdown().await;
    found
}

#[tokio::test]
async fn the_server_shares_the_summary_store_of_an_existing_cache_folder() {
    let version = env!("CARGO_PKG_VERSION");
    // No cache folder: the server creates none.
    let (_dir, root, root_uri) = workspace();
    let found = diagnostics_of_preview(&root_uri, "test-build").await;
    assert!(!found.is_empty(), "the project makes `g` a network");
    assert!(!root.join(".memlint_cache").exists(), "the server created a cache folder in the workspace");

    // A cache folder (as `memlint check` leaves): the summary of models.py is written there.
    let cache = root.join(".memlint_cache").join(version);
    std::fs::create_dir_all(&cache).unwrap();
    assert_eq!(diagnostics_of_preview(&root_uri, "test-build").await, found);
    let models_entry = summary_entry(&cache, MODELS).expect("the server wrote the summary of models.py");

    // A fresh server reads it: in place of models.py's summary, put the one of a models.py
    // whose `Synth` is no network (made by the server in another workspace), and the
    // finding that rests on `Synth` being a network is gone.
    let plain = MODELS.replace("class Synth(nn.Module):", "class Synth:");
    let (_other, other_root, other_uri) = workspace_with(&plain);
    std::fs::create_dir_all(other_root.join(".memlint_cache").join(version)).unwrap();
    assert!(diagnostics_of_preview(&other_uri, "test-build").await.is_empty());
    let plain_entry = summary_entry(&other_root.join(".memlint_cache"), &plain).expect("the other workspace's summary of its models.py");
    std::fs::copy(&plain_entry, &models_entry).unwrap();
    assert!(diagnostics_of_preview(&root_uri, "test-build").await.is_empty(), "the server did not read the store");
    // Another build reads nothing of it.
    assert_eq!(diagnostics_of_preview(&root_uri, "other-build").await, found);
}
