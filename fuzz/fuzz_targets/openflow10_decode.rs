//! Fuzz target: OpenFlow 1.0 decoding of untrusted bytes. Reads one
//! message with `sluice_openflow::of10::decode10` (must never panic);
//! whatever decodes must encode and decode again to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_openflow::of10::{decode10, encode10};

fuzz_target!(|data: &[u8]| {
    if let Ok((xid, msg)) = decode10(data) {
        let bytes = encode10(&msg, xid);
        let (xid2, again) = decode10(&bytes).expect("re-encoded message decodes");
        assert_eq!((xid2, again), (xid, msg));
    }
});
