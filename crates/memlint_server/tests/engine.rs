//! The language server reports what `memlint check` reports: for every fixture and
//! bundled example, the published diagnostics (code, range, message, fix edits, and the
//! evidence's facts with a place as `relatedInformation`) equal the linter's findings
//! converted to LSP positions (UTF-16, the default encoding).

mod common;

use common::{push_client, TestClient};
use memlint_linter::{lint, LineIndex, LinterSettings};
use serde_json::{json, Value};

fn corpus() -> Vec<(String, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut files = Vec::new();
    for dir in ["crates/memlint_linter/tests/fixtures", "tests/examples"] {
        let mut stack = vec![std::path::Path::new(root).join(dir)];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            } else if path.extension().is_some_and(|e| e == "py") {
                files.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    files.sort();
    assert!(files.len() >= 15, "fixtures and examples not found");
    files
}

fn position(index: &LineIndex, text: &str, offset: usize) -> Value {
    let (line, character) = index.utf16_position(offset, text);
    json!({"line": line, "character": character})
}

/// What the linter finds, in the shape the server publishes (the fields compared).
fn expected(text: &str) -> Vec<Value> {
    let index = LineIndex::new(text);
    lint(text, &LinterSettings::default())
        .diagnostics
        .iter()
        .map(|d| {
            let edits: Vec<Value> = d
                .fix
                .iter()
                .flat_map(|f| f.edits.iter())
                .map(|e| json!({"newText": e.content, "range": {"start": position(&index, text, e.range.start), "end": position(&index, text, e.range.end)}}))
                .collect();
            let related: Vec<Value> = d
                .evidence
                .iter()
                .filter_map(|f| {
                    let r = f.range.as_ref()?;
                    Some(json!({"message": f.text, "range": {"start": position(&index, text, r.start), "end": position(&index, text, r.end)}}))
                })
                .collect();
            json!({
                "code": d.rule.code(),
                "message": d.message,
                "range": {"start": position(&index, text, d.range.start), "end": position(&index, text, d.range.end)},
                "edits": edits,
                "related": related,
            })
        })
        .collect()
}

fn published(publish: &Value) -> Vec<Value> {
    publish["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let related: Vec<Value> = d["relatedInformation"]
                .as_array()
                .map(|r| r.iter().map(|r| json!({"message": r["message"], "range": r["location"]["range"]})).collect())
                .unwrap_or_default();
            json!({
                "code": d["code"],
                "message": d["message"],
                "range": d["range"],
                "edits": d["data"]["fix"]["edits"].as_array().cloned().unwrap_or_default(),
                "related": related,
            })
        })
        .collect()
}

#[tokio::test]
async fn the_server_publishes_what_the_linter_finds_on_every_fixture() {
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, None).await;
    let mut compared = 0;
    let mut facts = 0;
    for (i, (name, text)) in corpus().into_iter().enumerate() {
        let uri = format!("file:///engine/{i}.py");
        client.open(&uri, &text).await;
        let publish = client.diagnostics_for(&uri).await;
        let want = expected(&text);
        compared += want.len();
        facts += want.iter().map(|w| w["related"].as_array().unwrap().len()).sum::<usize>();
        assert_eq!(published(&publish), want, "{name}");
    }
    assert!(compared > 50, "only {compared} findings compared");
    assert!(facts > 50, "only {facts} facts of evidence compared");
}
