//! (being written)

use super::Context;
use crate::report::Finding;

pub(crate) fn detect(_ctx: &Context<'_>) -> Vec<Finding> {
    Vec::new()
}
