//! Embeds the linter's build identity (`MEMLINT_BUILD_ID`, see `src/build_id.rs`): the
//! results cache keys on it, so a rebuild with a rule change invalidates cached results.

#[path = "src/build_id.rs"]
mod build_id;

use std::path::Path;

fn main() {
    // Read when the script runs, not when it was compiled: a build script compiled for
    // another checkout sharing this target folder would otherwise hash that checkout.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR for build scripts");
    let root = Path::new(&manifest_dir).join("../..");
    for path in build_id::LINTER_SOURCES {
        // For a folder, cargo re-runs this script when anything under it changes.
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    println!("cargo:rerun-if-changed=src/build_id.rs");
    let id = build_id::hash_sources(&root, build_id::LINTER_SOURCES);
    println!("cargo:rustc-env=MEMLINT_BUILD_ID={id}");
}
