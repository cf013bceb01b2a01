//! The root package's integration tests, one test binary (`cargo test --test it`; a single
//! module: `cargo test --test it golden`): the end-to-end tests of the `steplens` binary, the
//! golden (insta) tests and the corpus conformance tests. Each module was once its own test
//! crate; building them as one binary links the workspace once instead of once per file.
//! `support` holds the helpers they share.

mod advice;
mod check;
mod check_stats;
mod cli;
mod corpus;
mod critical_path;
mod detect_core;
mod detect_debug_api;
mod detect_gaudi;
mod detect_transpose;
mod detect_zero_grad;
mod docs_tables;
mod examples;
mod fuzz_regressions;
mod gaudi_cases;
mod gaudi_nodes;
mod golden;
mod hostile;
mod html;
mod kineto_compat;
mod lost_time;
mod memory;
mod module_graph;
mod output_path;
mod patterns;
mod perfetto;
mod perfetto_damage;
mod ranks;
mod savings_shown;
mod support;
mod tensorboard;
mod whatif;
