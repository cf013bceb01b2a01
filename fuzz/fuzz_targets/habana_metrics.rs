//! Fuzz target `habana_metrics`: any bytes through sniffing, the reader and the report. The seeds
//! (fuzz/seeds/habana_metrics) steer it toward this format; see fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| steplens_fuzz::load_and_report(data));
