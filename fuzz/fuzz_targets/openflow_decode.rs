//! Fuzz target: OpenFlow 1.3 decoding of untrusted bytes. Reads one
//! message with `sluice_openflow::decode` (must never panic); whatever
//! decodes must encode and decode again to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((header, msg)) = sluice_openflow::decode(data) {
        let bytes = sluice_openflow::encode(&msg, header.version, header.xid);
        let (_, again) = sluice_openflow::decode(&bytes).expect("re-encoded message decodes");
        assert_eq!(again, msg);
    }
});
