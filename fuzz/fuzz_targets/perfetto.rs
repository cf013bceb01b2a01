//! Fuzz target `perfetto`: any bytes through sniffing, the reader and the report. The seeds
//! (fuzz/seeds/perfetto) steer it toward this format; see fuzz/README.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| steplens_fuzz::load_and_report(data));
