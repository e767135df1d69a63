use super::Context; use crate::Rewrite;
pub fn in_dict(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
pub fn in_list(_source: &str, _ctx: &Context) -> Option<Rewrite> { None }
