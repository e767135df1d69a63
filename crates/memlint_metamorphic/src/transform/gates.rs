use super::Context; use crate::Rewrite;
pub fn gate_variable(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
pub fn if_true(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
