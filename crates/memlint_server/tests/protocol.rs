//! The server over the protocol, in-process: whole JSON messages, compared with insta
//! snapshots where the whole message is the point.

mod common;

use common::{apply_text_edits, pull_client, push_client, TestClient};
use serde_json::{json, Value};

const URI: &str = "file:///memlint-test/train.py";

/// A training loop with two findings: MEM002 (unsafe fix) on line 9 and MEM004 (safe fix) on line 10.
const TRAIN: &str = "import torch


def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
        torch.cuda.empty_cache()
    return total


net = torch.nn.Linear(4, 4)
train(net, torch.utils.data.DataLoader(range(4)), torch.optim.SGD(net.parameters(), lr=0.1))
";

async fn push_server() -> TestClient {
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, None).await;
    client
}

fn codes(publish: &Value) -> Vec<String> {
    publish["params"]["diagnostics"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect()
}

fn range(line: u32, start: u32, end_line: u32, end: u32) -> Value {
    json!({"start": {"line": line, "character": start}, "end": {"line": end_line, "character": end}})
}

#[tokio::test]
async fn initialize_advertises_capabilities_for_a_push_client() {
    let mut client = TestClient::start();
    let response = client.initialize(push_client(), Value::Null, None).await;
    insta::assert_json_snapshot!(response, {".result.serverInfo.version" => "[version]"});
    assert_eq!(client.shutdown().await, json!({"jsonrpc": "2.0", "id": 2, "result": null}));
}

#[tokio::test]
async fn initialize_negotiates_utf8_and_pull_diagnostics() {
    let mut client = TestClient::start();
    let response = client.initialize(pull_client(), Value::Null, None).await;
    let caps = &response["result"]["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-8");
    assert_eq!(caps["diagnosticProvider"], json!({"identifier": "memlint", "interFileDependencies": true, "workspaceDiagnostics": false}));
    // The pull client offered dynamic file watching: the server registers its config files.
    let registration = client.expect("client/registerCapability").await;
    insta::assert_json_snapshot!(registration["params"]);
}

#[tokio::test]
async fn diagnostics_are_pushed_on_open() {
    let mut client = push_server().await;
    client.open(URI, TRAIN).await;
    let publish = client.diagnostics_for(URI).await;
    insta::assert_json_snapshot!(publish);
}

#[tokio::test]
async fn diagnostics_follow_incremental_changes_and_clear_on_close() {
    let mut client = push_server().await;
    client.open(URI, TRAIN).await;
    assert_eq!(codes(&client.diagnostics_for(URI).await), ["MEM002", "MEM004"]);
    // Delete the `empty_cache()` line (line 10, through the line break).
    client.change(URI, 2, json!([{"range": range(10, 0, 11, 0), "text": ""}])).await;
    let publish = client.diagnostics_for(URI).await;
    assert_eq!(publish["params"]["version"], 2);
    assert_eq!(codes(&publish), ["MEM002"]);
    // Put it back, typed in two pieces in one notification.
    client
        .change(
            URI,
            3,
            json!([
                {"range": range(10, 0, 10, 0), "text": "        torch.cuda\n"},
                {"range": range(10, 18, 10, 18), "text": ".empty_cache()"},
            ]),
        )
        .await;
    let publish = client.diagnostics_for(URI).await;
    assert_eq!(publish["params"]["version"], 3);
    assert_eq!(codes(&publish), ["MEM002", "MEM004"]);
    assert_eq!(publish["params"]["diagnostics"][1]["range"], range(10, 8, 10, 32));
    client.notify("textDocument/didClose", json!({"textDocument": {"uri": URI}})).await;
    let publish = client.diagnostics_for(URI).await;
    assert_eq!(publish["params"], json!({"uri": URI, "diagnostics": []}));
}

#[tokio::test]
async fn only_the_latest_version_is_published_after_a_burst_of_changes() {
    let mut client = push_server().await;
    client.open(URI, TRAIN).await;
    // Many quick edits: add and remove a comment at the end of line 0, ending with the
    // empty_cache line deleted.
    let mut version = 1;
    for _ in 0..20 {
        version += 1;
        client.change(URI, version, json!([{"range": range(0, 12, 0, 12), "text": "  # x"}])).await;
        version += 1;
        client.change(URI, version, json!([{"range": range(0, 12, 0, 17), "text": ""}])).await;
    }
    version += 1;
    client.change(URI, version, json!([{"range": range(10, 0, 11, 0), "text": ""}])).await;
    let mut last_version = 0;
    loop {
        let publish = client.diagnostics_for(URI).await;
        let v = publish["params"]["version"].as_i64().unwrap();
        assert!(v > last_version, "version {v} published after {last_version}");
        last_version = v;
        if v == version as i64 {
            assert_eq!(codes(&publish), ["MEM002"]);
            break;
        }
    }
}

/// Two functions: an edit in one is answered first by a prediction (see
/// `memlint_server::incremental`), then checked by a complete lint.
const TWO_FUNCTIONS: &str = "import torch


def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        total += loss
    return total


def evaluate(model, loader):
    model.eval()
    outs = []
    for x, _ in loader:
        outs.append(model(x))
    return outs
";

/// A push client's server that predicts after an edit of a file whose complete lint took
/// at least `after` (10 ms by default, see `memlint_server::Options::predict_after`).
async fn push_server_predicting_after(after: std::time::Duration) -> TestClient {
    let mut client = TestClient::start_with(memlint_server::Options { predict_after: after, ..Default::default() });
    client.initialize(push_client(), Value::Null, None).await;
    client
}

async fn predicting_push_server() -> TestClient {
    push_server_predicting_after(std::time::Duration::ZERO).await
}

#[tokio::test]
async fn an_edit_inside_a_function_is_published_once_when_the_prediction_holds() {
    let mut client = predicting_push_server().await;
    let uri = "file:///memlint-test/two.py";
    client.open(uri, TWO_FUNCTIONS).await;
    assert_eq!(codes(&client.diagnostics_for(uri).await), ["MEM002", "MEM006", "MEM001"]);
    // `loss` misspelt where it accumulates (line 9): MEM002 goes, evaluate's stay.
    client.change(uri, 2, json!([{"range": range(9, 18, 9, 18), "text": "x"}])).await;
    let publish = client.diagnostics_for(uri).await;
    assert_eq!(publish["params"]["version"], 2);
    assert_eq!(codes(&publish), ["MEM006", "MEM001"]);
    assert_eq!(publish["params"]["diagnostics"][0]["range"], range(17, 8, 17, 29));
    // The complete lint agrees: nothing more is published for version 2. (It takes
    // milliseconds; a hover round trip after the wait flushes anything sent before it.)
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    client.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})).await;
    assert_eq!(client.taken("textDocument/publishDiagnostics"), Vec::<Value>::new());
}

/// The last publish for `uri` once the server is quiet (the prediction, and the complete
/// lint's correction if it made one).
async fn last_publish(client: &mut TestClient, uri: &str) -> Value {
    let first = client.diagnostics_for(uri).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    client.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})).await;
    client.taken("textDocument/publishDiagnostics").into_iter().filter(|m| m["params"]["uri"] == uri).last().unwrap_or(first)
}

#[tokio::test]
async fn after_each_edit_the_published_json_is_what_a_fresh_open_of_the_text_publishes() {
    // A finding's JSON is written again from the last publish where the finding is the
    // same at the same places (`published.rs`): it must read as if made afresh.
    let mut client = predicting_push_server().await;
    let uri = "file:///memlint-test/two.py";
    let mut text = TWO_FUNCTIONS.to_owned();
    client.open(uri, &text).await;
    client.diagnostics_for(uri).await;
    let edits = [
        json!({"range": range(15, 4, 15, 4), "text": "x"}),
        json!({"range": range(15, 4, 15, 5), "text": ""}),
        json!({"range": range(9, 13, 9, 13), "text": " "}),
        json!({"range": range(4, 4, 4, 9), "text": "tally"}),
        json!({"range": range(9, 8, 9, 13), "text": "tally"}),
        json!({"range": range(12, 0, 12, 0), "text": "\n"}),
        json!({"range": range(10, 11, 10, 16), "text": "tally"}),
    ];
    for (version, edit) in (2..).zip(edits) {
        text = apply_text_edits(&text, &[json!({"range": edit["range"], "newText": edit["text"]})], false);
        client.change(uri, version, json!([edit])).await;
        let published = last_publish(&mut client, uri).await;
        assert_eq!(published["params"]["version"], version);
        let mut fresh = push_server().await;
        fresh.open(uri, &text).await;
        let expected = fresh.diagnostics_for(uri).await;
        assert!(!expected["params"]["diagnostics"].as_array().unwrap().is_empty());
        assert_eq!(published["params"]["diagnostics"], expected["params"]["diagnostics"], "version {version}:\n{text}");
    }
}

const CALLER: &str = "import torch\n\n\ndef evaluate(model, loader):\n    model.eval()\n    outs = []\n    for x in loader:\n        outs.append(model(x).argmax(1).tolist())\n    return outs\n\n\ndef run(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n\n\ndef summarize(values):\n    count = 0\n    for v in values:\n        count += 1\n    average = sum(values) / max(count, 1)\n    print(f\"{count} values, average {average:.3f}\")\n    return average\n";

#[tokio::test]
async fn a_wrong_prediction_is_corrected_by_the_complete_lint_for_the_same_version() {
    let mut client = predicting_push_server().await;
    let uri = "file:///memlint-test/caller.py";
    client.open(uri, CALLER).await;
    assert_eq!(codes(&client.diagnostics_for(uri).await), Vec::<String>::new());
    // The caller's `no_grad` misspelt: `evaluate`'s forward now tracks gradients. The
    // prediction re-lints only `run`, so it misses that; the complete lint finds it.
    client.change(uri, 2, json!([{"range": range(12, 16, 12, 16), "text": "x"}])).await;
    let predicted = client.diagnostics_for(uri).await;
    assert_eq!((predicted["params"]["version"].clone(), codes(&predicted)), (json!(2), vec![]));
    let corrected = client.diagnostics_for(uri).await;
    assert_eq!((corrected["params"]["version"].clone(), codes(&corrected)), (json!(2), vec!["MEM001".to_owned()]));
}

#[tokio::test]
async fn a_file_linted_faster_than_predict_after_is_not_predicted() {
    let mut client = push_server_predicting_after(std::time::Duration::from_secs(3600)).await;
    let uri = "file:///memlint-test/caller.py";
    client.open(uri, CALLER).await;
    assert_eq!(codes(&client.diagnostics_for(uri).await), Vec::<String>::new());
    client.change(uri, 2, json!([{"range": range(12, 16, 12, 16), "text": "x"}])).await;
    let publish = client.diagnostics_for(uri).await;
    assert_eq!((publish["params"]["version"].clone(), codes(&publish)), (json!(2), vec!["MEM001".to_owned()]));
}

#[tokio::test]
async fn each_version_is_published_even_when_a_request_linted_it_first() {
    // Eglot asks for a hover right after each edit: the hover's lint of the new version
    // may be stored before the pushed one, which must still be published.
    let mut client = push_server().await;
    let uri = "file:///memlint-test/two.py";
    client.open(uri, TWO_FUNCTIONS).await;
    client.diagnostics_for(uri).await;
    for version in 2..12 {
        let text = if version % 2 == 0 { "x" } else { "" };
        let range = if version % 2 == 0 { range(9, 18, 9, 18) } else { range(9, 18, 9, 19) };
        client.change(uri, version, json!([{"range": range, "text": text}])).await;
        client.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 9, "character": 8}})).await;
        let publish = client.diagnostics_for(uri).await;
        assert_eq!(publish["params"]["version"], version);
    }
}

/// Non-ASCII identifiers, strings with emoji and a CJK comment before and after findings.
const UNICODE: &str = "import torch


def entraîner(model, loader, optimizer):
    total = 0
    for lot in loader:
        loss = model(lot).sum()
        loss.backward()
        optimizer.step()
        étiquette = \"🔥🚀 ü\"; total += loss  # 清理
        étiquette = \"🔥🚀 ü\"; torch.cuda.empty_cache()  # 清理
    return total


réseau = torch.nn.Linear(4, 4)
entraîner(réseau, torch.utils.data.DataLoader(range(4)), torch.optim.SGD(réseau.parameters(), lr=0.1))
";

#[tokio::test]
async fn unicode_positions_in_utf16() {
    let mut client = push_server().await;
    client.open(URI, UNICODE).await;
    let publish = client.diagnostics_for(URI).await;
    assert_eq!(codes(&publish), ["MEM002", "MEM004"]);
    let diagnostics = &publish["params"]["diagnostics"];
    // 8 spaces + `étiquette = "` (13 units) + 2 emoji (4 units) + ` ü"; ` (5 units) = 30.
    let line = UNICODE.lines().nth(9).unwrap();
    let start: usize = line[..line.find("total").unwrap()].chars().map(char::len_utf16).sum();
    assert_eq!(start, 30);
    assert_eq!(diagnostics[0]["range"], range(9, 30, 9, 43));
    assert_eq!(diagnostics[1]["range"], range(10, 30, 10, 54));
    // The fix edit converts the same way: `.item()` lands right after `loss`.
    let edits = diagnostics[0]["data"]["fix"]["edits"].as_array().unwrap().clone();
    assert_eq!(edits, [json!({"range": range(9, 43, 9, 43), "newText": ".item()"})]);
    let fixed = apply_text_edits(UNICODE, &edits, false);
    assert!(fixed.contains("étiquette = \"🔥🚀 ü\"; total += loss.item()  # 清理\n"), "{fixed}");
}

#[tokio::test]
async fn unicode_positions_in_utf8() {
    let mut client = TestClient::start();
    let caps = json!({"general": {"positionEncodings": ["utf-8"]}});
    let init = client.initialize(caps, Value::Null, None).await;
    assert_eq!(init["result"]["capabilities"]["positionEncoding"], "utf-8");
    client.open(URI, UNICODE).await;
    let publish = client.diagnostics_for(URI).await;
    let line = UNICODE.lines().nth(9).unwrap();
    let start = line.find("total").unwrap() as u32;
    // 8 + `étiquette = "` (14 bytes) + 2 emoji (8 bytes) + ` ü"; ` (6 bytes).
    assert_eq!(start, 36);
    assert_eq!(publish["params"]["diagnostics"][0]["range"], range(9, 36, 9, 49));
    let edits = publish["params"]["diagnostics"][0]["data"]["fix"]["edits"].as_array().unwrap().clone();
    assert_eq!(edits, [json!({"range": range(9, 49, 9, 49), "newText": ".item()"})]);
    // Hover at a UTF-8 column inside the finding finds it.
    let hover = client
        .request("textDocument/hover", json!({"textDocument": {"uri": URI}, "position": {"line": 10, "character": 40}}))
        .await;
    assert_eq!(hover["result"]["range"], range(10, 36, 10, 60));
    // Applying the fix as an incremental edit in UTF-8 columns after the emoji.
    client.change(URI, 2, json!([{"range": range(9, 49, 9, 49), "text": ".item()"}])).await;
    let publish = client.diagnostics_for(URI).await;
    assert_eq!(publish["params"]["version"], 2);
    assert_eq!(codes(&publish), ["MEM004"]);
}

async fn code_actions(client: &mut TestClient, line: u32, only: Option<Value>) -> Value {
    let mut context = json!({"diagnostics": []});
    if let Some(only) = only {
        context["only"] = only;
    }
    client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": range(line, 10, line, 10), "context": context}),
        )
        .await
}

#[tokio::test]
async fn code_actions_offer_the_fix_a_noqa_and_fix_all() {
    let mut client = push_server().await;
    client.open(URI, TRAIN).await;
    let response = code_actions(&mut client, 10, None).await;
    insta::assert_json_snapshot!(response);
    // Applying the quick fix removes the line.
    let edits = response["result"][0]["edit"]["changes"][URI].as_array().unwrap().clone();
    let fixed = apply_text_edits(TRAIN, &edits, false);
    assert_eq!(fixed, TRAIN.replace("        torch.cuda.empty_cache()\n", ""));
}

#[tokio::test]
async fn unsafe_fixes_are_offered_but_not_preferred_and_only_filters_kinds() {
    let mut client = push_server().await;
    client.open(URI, TRAIN).await;
    let response = code_actions(&mut client, 9, Some(json!(["quickfix"]))).await;
    let titles: Vec<_> = response["result"].as_array().unwrap().iter().map(|a| a["title"].as_str().unwrap().to_owned()).collect();
    assert_eq!(titles, ["Accumulate `loss.item()` (unsafe) (MEM002)", "Disable MEM002 for this line"]);
    assert_eq!(response["result"][0]["isPreferred"], false);
    let only_fix_all = code_actions(&mut client, 9, Some(json!(["source.fixAll"]))).await;
    let kinds: Vec<_> = only_fix_all["result"].as_array().unwrap().iter().map(|a| a["kind"].clone()).collect();
    assert_eq!(kinds, [json!("source.fixAll.memlint")]);
}

#[tokio::test]
async fn disable_for_this_line_merges_into_an_existing_noqa() {
    let mut client = push_server().await;
    let text = TRAIN.replace("torch.cuda.empty_cache()", "torch.cuda.empty_cache()  # noqa: E501");
    client.open(URI, &text).await;
    client.diagnostics_for(URI).await;
    let response = code_actions(&mut client, 10, Some(json!(["quickfix"]))).await;
    let disable = response["result"].as_array().unwrap().iter().find(|a| a["title"] == "Disable MEM004 for this line").unwrap();
    let edits = disable["edit"]["changes"][URI].as_array().unwrap().clone();
    let fixed = apply_text_edits(&text, &edits, false);
    assert!(fixed.contains("torch.cuda.empty_cache()  # noqa: E501, MEM004\n"), "{fixed}");
    // And the server agrees the finding is gone.
    client.change(URI, 2, json!([{"text": fixed}])).await;
    assert_eq!(codes(&client.diagnostics_for(URI).await), ["MEM002"]);
}

#[tokio::test]
async fn fix_all_is_resolved_lazily_with_apply_fixes() {
    let mut client = TestClient::start();
    client.initialize(pull_client(), json!({"unsafeFixes": true}), None).await;
    client.open(URI, TRAIN).await;
    let response = code_actions(&mut client, 0, Some(json!(["source.fixAll.memlint"]))).await;
    let action = response["result"][0].clone();
    insta::assert_json_snapshot!(action);
    let resolved = client.request("codeAction/resolve", action).await;
    let edits = resolved["result"]["edit"]["changes"][URI].as_array().unwrap().clone();
    let fixed = apply_text_edits(TRAIN, &edits, true);
    let settings = memlint_linter::LinterSettings::default();
    let expected = memlint_linter::apply_fixes(TRAIN, &settings, memlint_linter::FixMode::Unsafe).source;
    assert_eq!(fixed, expected);
    assert!(fixed.contains("total += loss.item()") && !fixed.contains("empty_cache"), "{fixed}");
    // A resolve for a version the document has left is refused, not applied to new text.
    client.change(URI, 2, json!([{"range": range(0, 0, 0, 0), "text": "# edited\n"}])).await;
    let stale = client.request("codeAction/resolve", response["result"][0].clone()).await;
    assert_eq!(stale["error"]["code"], -32801);
}

#[tokio::test]
async fn fix_all_without_resolve_support_carries_its_edit_and_safe_fixes_only() {
    let mut client = push_server().await;
    client.open(URI, TRAIN).await;
    let response = code_actions(&mut client, 0, Some(json!(["source"]))).await;
    let edits = response["result"][0]["edit"]["changes"][URI].as_array().unwrap().clone();
    let fixed = apply_text_edits(TRAIN, &edits, false);
    assert_eq!(fixed, TRAIN.replace("        torch.cuda.empty_cache()\n", ""));
}

#[tokio::test]
async fn hover_shows_the_rule_documentation() {
    let mut client = push_server().await;
    client.open(URI, TRAIN).await;
    let hover = client
        .request("textDocument/hover", json!({"textDocument": {"uri": URI}, "position": {"line": 10, "character": 20}}))
        .await;
    let value = hover["result"]["contents"]["value"].as_str().unwrap();
    assert_eq!(hover["result"]["contents"]["kind"], "markdown");
    assert!(value.starts_with("**memlint MEM004** `empty-cache-in-loop`: `torch.cuda.empty_cache()` in the per-step loop"), "{value}");
    assert!(value.contains(memlint_linter::Rule::EmptyCacheInLoop.doc().markdown.trim()), "{value}");
    assert!(!value.contains("memlint verify"), "{value}");
    // Where to read the page again: the command that prints it (the documentation is in
    // the binary), not a path inside memlint's repository that a user's project lacks.
    assert!(value.ends_with("MEM004 documentation in a terminal: `memlint rule empty-cache-in-loop`"), "{value}");
    assert!(!value.contains("docs/rules") && !value.contains("memlint's repository"), "{value}");
    // Nothing under the cursor: no hover.
    let none = client
        .request("textDocument/hover", json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 2}}))
        .await;
    assert_eq!(none["result"], Value::Null);
}

#[tokio::test]
async fn hover_shows_measured_savings_from_a_verify_report() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".memlint")).unwrap();
    let report = json!({
        "estimated": false,
        "device": {"name": "NVIDIA H100 80GB HBM3"},
        "scenarios": [
            {"code": "MEM004", "name": "empty-cache-in-loop", "variant": "resnet-step", "peak_bytes_bad": 1, "peak_bytes_fixed": 1,
             "saving_bytes": 0, "saving_summary": "41 fewer cudaMalloc calls per 50 steps; step time 12.1 ms -> 9.8 ms", "error": null},
            {"code": "MEM001", "saving_summary": "not this rule"}
        ]
    });
    std::fs::write(root.join(".memlint/verify.json"), report.to_string()).unwrap();
    let root_uri = format!("file://{}", root.display());
    let uri = format!("{root_uri}/src/train.py");
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, Some(&root_uri)).await;
    client.open(&uri, TRAIN).await;
    let hover = client
        .request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 10, "character": 9}}))
        .await;
    let value = hover["result"]["contents"]["value"].as_str().unwrap();
    assert!(
        value.contains("**Measured by `memlint verify`** (`.memlint/verify.json`):\n- `resnet-step`: 41 fewer cudaMalloc calls per 50 steps; step time 12.1 ms -> 9.8 ms (measured on NVIDIA H100 80GB HBM3)"),
        "{value}"
    );
    assert!(!value.contains("not this rule"), "{value}");
    // memlint-verify.json in the root wins over nothing, and a broken one is reported, not fatal.
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/memlint-verify.json"), "{ not json").unwrap();
    let hover = client
        .request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 10, "character": 9}}))
        .await;
    let value = hover["result"]["contents"]["value"].as_str().unwrap();
    assert!(value.contains("*The `memlint verify` report `memlint-verify.json` could not be read: key must be a string"), "{value}");
}

/// The hover reads the report the real `memlint verify --backend sim --format json`
/// writes (the library function the command calls), and says its figures are estimates.
#[tokio::test]
async fn hover_reads_a_real_simulator_report_as_estimates() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let args = memlint_verify::VerifyArgs {
        rules: vec!["MEM004".into()],
        backend: memlint_verify::BackendKind::Sim,
        format: memlint_verify::Format::Json,
        output: Some(root.join("memlint-verify.json")),
        layers: 2,
        hidden: 256,
        batch: 32,
        iters: 3,
        ..Default::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = memlint_verify::run_with(&args, None, &mut out, &mut err, false);
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&err));
    let written: Value = serde_json::from_slice(&std::fs::read(root.join("memlint-verify.json")).unwrap()).unwrap();
    let scenario = &written["scenarios"][0];
    let variant = scenario["variant"].as_str().unwrap();
    let summary = scenario["saving_summary"].as_str().unwrap();
    assert!(!summary.is_empty(), "{written}");
    let root_uri = format!("file://{}", root.display());
    let uri = format!("{root_uri}/train.py");
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, Some(&root_uri)).await;
    client.open(&uri, TRAIN).await;
    let hover = client
        .request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 10, "character": 9}}))
        .await;
    let value = hover["result"]["contents"]["value"].as_str().unwrap();
    assert!(value.contains("**Estimated by `memlint verify --backend sim`** (`memlint-verify.json`):\n"), "{value}");
    assert!(value.contains(&format!("- `{variant}` ({}): {summary} (estimated", scenario["scenario"].as_str().unwrap())), "{value}");
    assert!(!value.contains("Measured by"), "{value}");
}

#[tokio::test]
async fn pull_diagnostics_are_full_then_unchanged_and_nothing_is_pushed() {
    let mut client = TestClient::start();
    client.initialize(pull_client(), Value::Null, None).await;
    client.open(URI, TRAIN).await;
    let first = client.request("textDocument/diagnostic", json!({"textDocument": {"uri": URI}})).await;
    insta::assert_json_snapshot!(first);
    let result_id = first["result"]["resultId"].clone();
    let again = client
        .request("textDocument/diagnostic", json!({"textDocument": {"uri": URI}, "previousResultId": result_id}))
        .await;
    assert_eq!(again["result"], json!({"kind": "unchanged", "resultId": result_id}));
    client.change(URI, 2, json!([{"range": range(10, 0, 11, 0), "text": ""}])).await;
    let changed = client
        .request("textDocument/diagnostic", json!({"textDocument": {"uri": URI}, "previousResultId": result_id}))
        .await;
    assert_eq!(changed["result"]["kind"], "full");
    assert_eq!(changed["result"]["items"].as_array().unwrap().len(), 1);
    assert!(client.taken("textDocument/publishDiagnostics").is_empty());
}

#[tokio::test]
async fn unknown_documents_get_an_error_and_the_server_lives_on() {
    let mut client = push_server().await;
    let other = "file:///memlint-test/never-opened.py";
    let hover = client
        .request("textDocument/hover", json!({"textDocument": {"uri": other}, "position": {"line": 0, "character": 0}}))
        .await;
    insta::assert_json_snapshot!(hover);
    let actions = client
        .request("textDocument/codeAction", json!({"textDocument": {"uri": other}, "range": range(0, 0, 0, 0), "context": {"diagnostics": []}}))
        .await;
    assert_eq!(actions["error"]["code"], -32602);
    client.change(other, 2, json!([{"text": "x = 1\n"}])).await;
    let log = client.expect("window/logMessage").await;
    assert_eq!(log["params"]["message"], format!("memlint: change to a document that is not open: {other}"));
    client.open(URI, TRAIN).await;
    assert_eq!(codes(&client.diagnostics_for(URI).await), ["MEM002", "MEM004"]);
}

#[tokio::test]
async fn malformed_params_get_an_error_or_a_log_and_the_server_lives_on() {
    let mut client = push_server().await;
    let bad_request = client.request("textDocument/hover", json!({"textDocument": 42})).await;
    assert_eq!(bad_request["error"]["code"], -32602);
    client.notify("textDocument/didOpen", json!({"textDocument": {"uri": URI}})).await;
    let log = client.expect("window/logMessage").await;
    insta::assert_json_snapshot!(log);
    // Not JSON at all, JSON but not JSON-RPC, and a bad header: each is logged.
    client.send_raw("{\"jsonrpc\": \"2.0\", \"method\": ").await;
    assert_eq!(client.expect("window/logMessage").await["params"]["message"].as_str().unwrap().split(" (").next().unwrap(), "memlint: ignored a message that is not JSON");
    client.send_raw("[1, 2]").await;
    assert_eq!(client.expect("window/logMessage").await["params"]["message"], "memlint: ignored a JSON message that is not JSON-RPC 2.0");
    client.send_bytes(b"Content-Length: many\r\n\r\n").await;
    assert_eq!(client.expect("window/logMessage").await["params"]["message"], "memlint: ignored bad Content-Length `many`");
    client.open(URI, TRAIN).await;
    assert_eq!(codes(&client.diagnostics_for(URI).await), ["MEM002", "MEM004"]);
    client.shutdown().await;
}

#[tokio::test]
async fn initialization_options_select_and_ignore_rules() {
    let mut client = TestClient::start();
    client.initialize(push_client(), json!({"ignore": ["empty-cache-in-loop"]}), None).await;
    client.open(URI, TRAIN).await;
    assert_eq!(codes(&client.diagnostics_for(URI).await), ["MEM002"]);
    // didChangeConfiguration (VS Code style, nested) switches to select MEM004 only.
    client
        .notify("workspace/didChangeConfiguration", json!({"settings": {"memlint": {"select": ["MEM004"], "ignore": []}}}))
        .await;
    assert_eq!(codes(&client.diagnostics_for(URI).await), ["MEM004"]);
    // An empty settings object (Neovim sends one after initializing) changes nothing.
    client.notify("workspace/didChangeConfiguration", json!({"settings": {}})).await;
    client.request("textDocument/hover", json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}})).await;
    assert!(client.taken("textDocument/publishDiagnostics").is_empty());
}

#[tokio::test]
async fn an_unknown_rule_in_the_settings_is_shown() {
    let mut client = TestClient::start();
    client.initialize(push_client(), json!({"memlint": {"select": ["MEM004", "MEM999"]}}), None).await;
    let shown = client.expect("window/showMessage").await;
    insta::assert_json_snapshot!(shown);
    client.open(URI, TRAIN).await;
    assert_eq!(codes(&client.diagnostics_for(URI).await), ["MEM004"]);
}

async fn pull(client: &mut TestClient, uri: &str) -> Vec<String> {
    let r = client.request("textDocument/diagnostic", json!({"textDocument": {"uri": uri}})).await;
    r["result"]["items"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn config_files_are_honoured_reloaded_and_a_broken_one_keeps_the_last_good_settings() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("pyproject.toml"), "[tool.memlint]\nignore = [\"MEM002\"]\n").unwrap();
    let root_uri = format!("file://{}", root.display());
    let uri = format!("{root_uri}/train.py");
    let mut client = TestClient::start();
    client.initialize(pull_client(), Value::Null, Some(&root_uri)).await;
    client.open(&uri, TRAIN).await;
    assert_eq!(pull(&mut client, &uri).await, ["MEM004"]);
    // A memlint.toml next to the file wins over pyproject.toml.
    std::fs::write(root.join("memlint.toml"), "select = [\"MEM002\"]\n").unwrap();
    let changed = json!({"changes": [{"uri": format!("{root_uri}/memlint.toml"), "type": 1}]});
    client.notify("workspace/didChangeWatchedFiles", changed.clone()).await;
    // The pulling client is asked to pull again.
    client.expect("workspace/diagnostic/refresh").await;
    assert_eq!(pull(&mut client, &uri).await, ["MEM002"]);
    // Broken: an unknown key. The user is told, and MEM002-only stays in force.
    std::fs::write(root.join("memlint.toml"), "select = [\"MEM002\"]\nslect = [\"MEM004\"]\n").unwrap();
    client.notify("workspace/didChangeWatchedFiles", changed.clone()).await;
    let shown = client.expect("window/showMessage").await;
    let message = shown["params"]["message"].as_str().unwrap().replace(&root.display().to_string(), "[ROOT]");
    insta::assert_snapshot!(message);
    assert_eq!(shown["params"]["type"], 1);
    assert_eq!(pull(&mut client, &uri).await, ["MEM002"]);
    // Fixed again: the new settings apply.
    std::fs::write(root.join("memlint.toml"), "select = [\"MEM001\", \"MEM004\"]\n").unwrap();
    client.notify("workspace/didChangeWatchedFiles", changed).await;
    assert_eq!(pull(&mut client, &uri).await, ["MEM004"]);
}

#[tokio::test]
async fn notebook_cells_are_linted_as_one_program() {
    let mut client = push_server().await;
    let nb = "file:///memlint-test/train.ipynb";
    let cell = |i: u32| format!("vscode-notebook-cell:/memlint-test/train.ipynb#cell{i}");
    let cells = [
        "import torch\n%matplotlib inline\nscaler = None",
        "# notes",
        "for x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    torch.cuda.empty_cache()",
    ];
    client
        .notify(
            "notebookDocument/didOpen",
            json!({
                "notebookDocument": {"uri": nb, "notebookType": "jupyter-notebook", "version": 1, "cells": [
                    {"kind": 2, "document": cell(0)}, {"kind": 1, "document": cell(1)}, {"kind": 2, "document": cell(2)}
                ]},
                "cellTextDocuments": [
                    {"uri": cell(0), "languageId": "python", "version": 1, "text": cells[0]},
                    {"uri": cell(1), "languageId": "markdown", "version": 1, "text": cells[1]},
                    {"uri": cell(2), "languageId": "python", "version": 1, "text": cells[2]}
                ]
            }),
        )
        .await;
    let first = client.diagnostics_for(&cell(0)).await;
    let third = client.diagnostics_for(&cell(2)).await;
    assert_eq!(first["params"]["diagnostics"], json!([]));
    assert_eq!(codes(&third), ["MEM004"]);
    assert_eq!(third["params"]["diagnostics"][0]["range"], range(3, 4, 3, 28));
    // Edit cell 2's text: remove the empty_cache line.
    client
        .notify(
            "notebookDocument/didChange",
            json!({"notebookDocument": {"uri": nb, "version": 2}, "change": {"cells": {"textContent": [
                {"document": {"uri": cell(2), "version": 2}, "changes": [{"range": range(2, 19, 3, 28), "text": ""}]}
            ]}}}),
        )
        .await;
    let third = client.diagnostics_for(&cell(2)).await;
    assert_eq!(third["params"]["diagnostics"], json!([]));
    assert_eq!(third["params"]["version"], 2);
    // Code actions and hover work on cell documents too.
    client
        .notify(
            "notebookDocument/didChange",
            json!({"notebookDocument": {"uri": nb, "version": 3}, "change": {"cells": {"textContent": [
                {"document": {"uri": cell(2), "version": 3}, "changes": [{"range": range(2, 19, 2, 19), "text": "\n    torch.cuda.empty_cache()"}]}
            ]}}}),
        )
        .await;
    assert_eq!(codes(&client.diagnostics_for(&cell(2)).await), ["MEM004"]);
    let actions = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": cell(2)}, "range": range(3, 6, 3, 6), "context": {"diagnostics": []}}),
        )
        .await;
    assert_eq!(actions["result"][0]["title"], "Remove the `empty_cache()` call (MEM004)");
    client.notify("notebookDocument/didClose", json!({"notebookDocument": {"uri": nb}, "cellTextDocuments": [{"uri": cell(0)}, {"uri": cell(1)}, {"uri": cell(2)}]})).await;
    let cleared = client.diagnostics_for(&cell(2)).await;
    assert_eq!(cleared["params"]["diagnostics"], json!([]));
}

/// An evaluation function whose network is built by `nn.Linear` on line 4 (0-based 3):
/// MEM001 on `net(x)`, line 8 (0-based 7).
const EVAL_LINEAR: &str = "import torch\nfrom torch import nn\n\nnet = nn.Linear(4, 2)\n\n\ndef evaluate(x):\n    return net(x).argmax(1)\n";

#[tokio::test]
async fn diagnostics_relate_their_evidence_and_the_hover_lists_it() {
    let mut client = push_server().await;
    let uri = "file:///memlint-test/evaluate.py";
    client.open(uri, EVAL_LINEAR).await;
    let publish = client.diagnostics_for(uri).await;
    assert_eq!(codes(&publish), ["MEM001"]);
    let diagnostic = &publish["params"]["diagnostics"][0];
    let related = diagnostic["relatedInformation"].as_array().unwrap_or_else(|| panic!("no relatedInformation: {diagnostic:#}"));
    // Every fact here has a place in this document; the construction is `nn.Linear(4, 2)`.
    assert!(related.iter().all(|r| r["location"]["uri"] == uri), "{related:#?}");
    let built = related
        .iter()
        .find(|r| r["message"].as_str().unwrap().starts_with("built by `nn.Linear(4, 2)`"))
        .unwrap_or_else(|| panic!("no construction among {related:#?}"));
    assert_eq!(built["location"]["range"], range(3, 6, 3, 21));
    assert!(related.iter().any(|r| r["location"]["range"] == diagnostic["range"]), "facts at the finding: {related:#?}");
    // The hover: what it showed before, and the evidence as a list, each fact with its line.
    let hover = client.request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 7, "character": 12}})).await;
    let value = hover["result"]["contents"]["value"].as_str().unwrap();
    assert!(value.starts_with("**memlint MEM001** `eval-without-no-grad`: forward pass `net(x)`"), "{value}");
    assert!(value.contains("\n\n*Help:* run evaluation under"), "{value}");
    let evidence = value.find("\n\n**Evidence:**\n").unwrap_or_else(|| panic!("no evidence: {value}"));
    let list: Vec<&str> = value[evidence..].lines().skip(3).take_while(|l| l.starts_with("- ")).collect();
    assert_eq!(list.len(), related.len(), "{value}");
    assert_eq!(list[0], "- `net` is a network (a `torch.nn.Module` instance) — *line 8*");
    assert!(list.contains(&"- built by `nn.Linear(4, 2)` (line 4): `torch.nn.Linear` — *line 4*"), "{list:#?}");
    assert!(value.contains(memlint_linter::Rule::EvalWithoutNoGrad.doc().markdown.trim()), "{value}");
}

#[tokio::test]
async fn notebook_evidence_points_into_the_cell_of_each_fact() {
    let mut client = push_server().await;
    let nb = "file:///memlint-test/eval.ipynb";
    let cell = |i: u32| format!("vscode-notebook-cell:/memlint-test/eval.ipynb#cell{i}");
    client
        .notify(
            "notebookDocument/didOpen",
            json!({
                "notebookDocument": {"uri": nb, "notebookType": "jupyter-notebook", "version": 1, "cells": [
                    {"kind": 2, "document": cell(0)}, {"kind": 1, "document": cell(1)}, {"kind": 2, "document": cell(2)}
                ]},
                "cellTextDocuments": [
                    {"uri": cell(0), "languageId": "python", "version": 1, "text": "import torch\nnet = torch.nn.Linear(4, 4)"},
                    {"uri": cell(1), "languageId": "markdown", "version": 1, "text": "# Evaluation"},
                    {"uri": cell(2), "languageId": "python", "version": 1, "text": "def evaluate(x):\n    return net(x).argmax(1)"}
                ]
            }),
        )
        .await;
    let third = client.diagnostics_for(&cell(2)).await;
    assert_eq!(codes(&third), ["MEM001"]);
    let diagnostic = &third["params"]["diagnostics"][0];
    assert_eq!(diagnostic["range"], range(1, 11, 1, 17));
    let related = diagnostic["relatedInformation"].as_array().unwrap_or_else(|| panic!("no relatedInformation: {diagnostic:#}"));
    // The construction is in the first cell, in that cell's own positions.
    let built = related
        .iter()
        .find(|r| r["message"].as_str().unwrap().starts_with("built by `torch.nn.Linear(4, 4)`"))
        .unwrap_or_else(|| panic!("no construction among {related:#?}"));
    assert_eq!(built["location"], json!({"uri": cell(0), "range": range(1, 6, 1, 27)}));
    assert!(related.iter().any(|r| r["location"] == json!({"uri": cell(2), "range": range(1, 11, 1, 14)})), "{related:#?}");
    // The hover names the cell of each fact, counted as Jupyter (and `memlint check`) count.
    let hover = client.request("textDocument/hover", json!({"textDocument": {"uri": cell(2)}, "position": {"line": 1, "character": 12}})).await;
    let value = hover["result"]["contents"]["value"].as_str().unwrap();
    assert!(value.contains("\n- built by `torch.nn.Linear(4, 4)`") && value.contains("— *cell 1, line 2*"), "{value}");
    assert!(value.contains("\n- `net` is a network (a `torch.nn.Module` instance) — *cell 3, line 2*"), "{value}");
}

/// A document named like a recorded script, with a finding (MEM004) on line 12, the line of
/// `tests/snapshot/data/eval_no_grad_bad.pickle` whose forward call held memory at the peak.
const RECORDED_NAME: &str = "eval_no_grad_bad.py";
fn with_finding_on_line_12() -> String {
    let mut text = String::from("import torch\n");
    text.push_str(&"\n".repeat(8));
    text.push_str("def evaluate(data):\n    for x in torch.utils.data.DataLoader(data):\n        torch.cuda.empty_cache()\n");
    text
}

fn recorded_snapshot() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/snapshot/data/eval_no_grad_bad.pickle")
}

#[tokio::test]
async fn hover_shows_bytes_measured_in_the_users_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".memlint")).unwrap();
    std::fs::copy(recorded_snapshot(), root.join(".memlint/snapshot.pickle")).unwrap();
    let root_uri = format!("file://{}", root.display());
    let uri = format!("{root_uri}/{RECORDED_NAME}");
    let mut client = TestClient::start();
    client.initialize(push_client(), Value::Null, Some(&root_uri)).await;
    let text = with_finding_on_line_12();
    client.open(&uri, &text).await;
    assert_eq!(codes(&client.diagnostics_for(&uri).await), ["MEM004"]);
    let hover = client
        .request("textDocument/hover", json!({"textDocument": {"uri": uri}, "position": {"line": 11, "character": 12}}))
        .await;
    let value = hover["result"]["contents"]["value"].as_str().unwrap();
    assert!(value.starts_with("**Measured in your run** (`.memlint/snapshot.pickle`): "), "{value}");
    assert!(value.contains("MiB alive at the peak"), "{value}");
    assert!(value.contains("**memlint MEM004**"), "{value}");
}

#[tokio::test]
async fn the_snapshot_setting_names_the_file_and_a_broken_one_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("runs")).unwrap();
    std::fs::copy(recorded_snapshot(), root.join("runs/eval.pickle")).unwrap();
    std::fs::write(root.join("runs/broken.pickle"), b"\x80\x04}(").unwrap();
    let root_uri = format!("file://{}", root.display());
    let uri = format!("{root_uri}/{RECORDED_NAME}");
    let text = with_finding_on_line_12();
    let mut client = TestClient::start();
    client.initialize(push_client(), json!({"snapshot": "runs/eval.pickle"}), Some(&root_uri)).await;
    client.open(&uri, &text).await;
    client.diagnostics_for(&uri).await;
    let at = json!({"textDocument": {"uri": uri}, "position": {"line": 11, "character": 12}});
    let value = client.request("textDocument/hover", at.clone()).await["result"]["contents"]["value"].as_str().unwrap().to_string();
    assert!(value.starts_with("**Measured in your run** (`eval.pickle`)"), "{value}");
    // a snapshot that cannot be read is said so, and the finding is still shown
    let mut client = TestClient::start();
    client.initialize(push_client(), json!({"snapshot": "runs/broken.pickle"}), Some(&root_uri)).await;
    client.open(&uri, &text).await;
    client.diagnostics_for(&uri).await;
    let value = client.request("textDocument/hover", at).await["result"]["contents"]["value"].as_str().unwrap().to_string();
    assert!(value.contains("could not be read") && value.contains("truncated"), "{value}");
}
