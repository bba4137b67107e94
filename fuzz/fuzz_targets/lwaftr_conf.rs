//! libFuzzer entry of target `lwaftr_conf`; the body and what it checks:
//! `sluice_fuzzing::lwaftr::conf`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::lwaftr::conf(data));
