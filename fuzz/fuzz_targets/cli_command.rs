//! libFuzzer entry of target `cli_command`; the body and what it checks:
//! `sluice_fuzzing::p4::cli_command`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzzing::p4::cli_command(data));
