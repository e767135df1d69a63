use super::Context; use crate::Rewrite;
pub fn for_to_while(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
pub fn enumerated(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
pub fn zipped(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
