//! The `memlint-metamorphic` binary: its table, its errors and exit statuses (0 every
//! rewrite invariant, 1 not, 2 a usage or I/O error), on a folder written here.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memlint-metamorphic"))
}

const TRAIN: &str = "import torch\n\n\ndef evaluate(model, val_loader):\n    for x in val_loader:\n        print(model(x).sum().item())\n\n\ndef main():\n    model = torch.nn.Linear(4, 2)\n    evaluate(model, [torch.ones(4)])\n";

#[test]
fn a_folder_gets_its_table_and_the_rewrites_that_lost_findings() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.py"), TRAIN).unwrap();
    std::fs::write(dir.path().join("broken.py"), "def f(:\n").unwrap();
    let out = bin().arg(dir.path()).arg("--details").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("2 cases (1 skipped: syntax errors)"), "{stdout}");
    for t in memlint_metamorphic::transform::ALL {
        assert!(stdout.contains(t.name), "{} missing from the table:\n{stdout}", t.name);
    }
    assert!(stdout.contains("\noverall "), "{stdout}");
    // The network is known by its construction (passed by `main`), not by its name: the
    // finding survives every rewrite (the details of a rewrite that changes findings are
    // checked in tests/invariance.rs, with a rewrite that drops `no_grad`).
    assert!(stdout.contains("neutral-names            1         1      1.000"), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "every rewrite is invariant:\n{stdout}");
    let out = bin().arg(dir.path()).args(["--transform", "enumerate", "--min-invariance", "0.5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn files_from_a_list_and_rewrites_written_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("pkg")).unwrap();
    let calls_its_model = format!("{TRAIN}    print(model(torch.ones(4)))\n");
    std::fs::write(dir.path().join("pkg/train.py"), &calls_its_model).unwrap();
    std::fs::write(dir.path().join("other.py"), TRAIN).unwrap();
    std::fs::write(dir.path().join("list.txt"), "# labelled\npkg/train.py\n").unwrap();
    let out = bin().arg(dir.path()).arg("--files-from").arg(dir.path().join("list.txt")).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("1 cases"), "{}", String::from_utf8_lossy(&out.stdout));
    let written = dir.path().join("out");
    let out = bin().arg(dir.path()).args(["--transform", "factory-module,for-to-while", "--write"]).arg(&written).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let factory = std::fs::read_to_string(written.join("factory-module/pkg/_factory.py")).expect("the sibling module written beside the rewrite");
    assert!(factory.contains("def _make_model():\n    return torch.nn.Linear(4, 2)"), "{factory}");
    assert!(std::fs::read_to_string(written.join("for-to-while/other.py")).unwrap().contains("while True:"));
}

#[test]
fn usage_and_input_errors_exit_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--transform", "rot13"], "unknown transformation `rot13`"),
        (&["/no/such/folder"], "/no/such/folder: not a folder"),
        (&[".", "--files-from", "/no/such/list"], "/no/such/list: cannot read"),
        (&[".", "--manifest", "list.txt"], "not a corpus manifest"),
    ];
    std::fs::write(dir.path().join("list.txt"), "a.py\n").unwrap();
    for (args, message) in cases {
        let out = bin().args(args).current_dir(dir.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    let out = bin().arg("--list").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), memlint_metamorphic::transform::ALL.len());
}
