//! Bad input gets an error naming the file, never a panic: every prefix of a recorded
//! snapshot, random byte changes, and files that are not snapshots at all (read, analysed,
//! searched for a loop, and given to the batch model).

use std::path::Path;

use memlint_snapshot::{analyse, read_snapshot_from, SnapshotError};

fn recorded() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/snapshot/data/eval_no_grad_bad.pickle")).unwrap()
}

fn read(bytes: &[u8]) -> Result<(), SnapshotError> {
    let snap = read_snapshot_from(bytes, Path::new("x.pickle"))?;
    analyse(&snap, 10);
    // What verify --from-snapshot asks of it: a loop, or a reason there is none.
    let _ = memlint_snapshot::find_loop(&snap);
    // What snapshot --budget asks of it: predictions, or a reason there are none.
    if let Ok(model) = memlint_snapshot::batch::BatchModel::new(&snap, Some(4)) {
        model.report(Some(1 << 30), Some(100));
    }
    Ok(())
}

#[test]
fn every_truncation_is_an_error_naming_the_file() {
    let data = recorded();
    for n in 0..data.len() {
        let err = read(&data[..n]).expect_err("a truncated snapshot cannot be read");
        let msg = err.to_string();
        assert!(msg.contains("x.pickle"), "{msg}");
    }
    let err = read(&data[..data.len() / 2]).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn random_corruption_never_panics() {
    let data = recorded();
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 {
        let mut d = data.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % d.len() as u64) as usize;
            d[i] = next() as u8;
        }
        let _ = read(&d);
    }
    for len in [0usize, 1, 7, 64, 1000] {
        let junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        assert!(read(&junk).is_err());
    }
}

#[test]
fn clear_errors_for_what_is_not_a_snapshot() {
    let e = read(b"hello world").unwrap_err().to_string();
    assert!(e.contains("not a pickle"), "{e}");
    // pickle.dumps({'a': 1}, protocol=4)
    let e = read(b"\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94K\x01s.").unwrap_err().to_string();
    assert!(e.contains("not a PyTorch memory snapshot"), "{e}");
    // pickle.dumps([1, 2], protocol=2)
    let e = read(b"\x80\x02]q\x00(K\x01K\x02e.").unwrap_err().to_string();
    assert!(e.contains("holds a list"), "{e}");
    // a class instance (GLOBAL + REDUCE), protocol 0
    let e = read(b"cos\nsystem\n(S'true'\ntR.").unwrap_err().to_string();
    assert!(e.contains("plain data") || e.contains("not a pickle"), "{e}");
    // only segments, no trace
    let e = read(b"\x80\x04}\x94(\x8c\x08segments\x94]\x94u.").unwrap_err().to_string();
    assert!(e.contains("_record_memory_history"), "{e}");
}
