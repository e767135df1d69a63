use super::Context; use crate::Rewrite;
pub fn into_classes(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
