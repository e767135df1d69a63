use super::Context; use crate::Rewrite;
pub fn alias(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
