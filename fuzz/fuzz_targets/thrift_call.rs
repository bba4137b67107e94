//! libFuzzer entry of target `thrift_call`; the body and what it checks:
//! `sluice_fuzzing::control::thrift_call`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::control::thrift_call(data));
