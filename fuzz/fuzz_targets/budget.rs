//! Fuzz target `budget`: the budget-file (TOML) parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| steplens_fuzz::parse_budget(data));
