use super::Context; use crate::Rewrite;
pub fn local(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
pub fn sibling(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
