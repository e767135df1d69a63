//! Builds `src/named_walk.c`, the walk behind `NamedNodes::of`, against the headers of the
//! tree-sitter crate this crate links (its `src/` folder beside the `include/` folder it
//! announces as `DEP_TREE_SITTER_INCLUDE`).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/named_walk.c");
    let include = PathBuf::from(std::env::var("DEP_TREE_SITTER_INCLUDE").expect("the tree-sitter crate announces its include folder"));
    let internal = include.parent().expect("the include folder has a parent").join("src");
    cc::Build::new()
        .file("src/named_walk.c")
        .include(&include)
        .include(&internal)
        .flag_if_supported("-std=c11")
        .define("_POSIX_C_SOURCE", "200112L")
        .define("_DEFAULT_SOURCE", None)
        .warnings(false)
        .compile("memlint_named_walk");
}
