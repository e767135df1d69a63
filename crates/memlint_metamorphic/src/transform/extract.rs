use super::Context; use crate::Rewrite;
pub fn extract_loop_bodies(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
