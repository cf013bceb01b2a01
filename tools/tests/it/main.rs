//! steplens-tools' integration tests, one test binary (`cargo test -p steplens-tools --test it`):
//! the benchmarks' shared workload and the ranks benchmark's planted truth.

mod ranks_bench;
mod workload;
