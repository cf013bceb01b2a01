//! steplens-ingest's integration tests, one test binary (`cargo test -p steplens-ingest --test
//! it`; a single module: `cargo test -p steplens-ingest --test it edge_cases`): loading inline
//! traces, samples and damaged inputs of every format. Each module was once its own test crate;
//! `common` holds the invariant check they share (the root package's corpus test includes it
//! too, through `#[path]`).

mod common;
mod damage_sweep;
mod edge_cases;
mod gzip_pipeline;
mod habana;
mod hltv;
mod invariant_mutations;
mod invariants;
mod kineto_schemas;
mod limits;
mod parallel_load;
mod perfetto_proto_fresh;
mod perfetto_read;
