//! Metamorphic tests for memlint (issue 32): rewrites of Python code that keep what the
//! program does ([`transform`]), and a harness ([`harness`]) that lints a case and each of
//! its rewrites and checks that every finding moves with its code and none appears.

pub mod cases;
pub mod harness;
pub mod project;
pub mod rewrite;
pub mod scope;
pub mod transform;

pub use memlint_python::tree_sitter;
pub use rewrite::Rewrite;
