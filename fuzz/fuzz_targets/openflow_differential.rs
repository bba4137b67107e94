//! libFuzzer entry of target `openflow_differential`; the body and what it checks:
//! `sluice_fuzzing::openflow::differential`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::openflow::differential(data));
