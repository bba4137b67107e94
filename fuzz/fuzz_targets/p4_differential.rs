//! libFuzzer entry of target `p4_differential`; the body and what it checks:
//! `sluice_fuzzing::p4::differential`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::p4::differential(data));
