//! The pcap file reader (`--pcap` ports, `sluice replay`, the bench's
//! traffic files).

use sluice_ports::pcapfile::{frames_of, SNAPLEN};

/// Target `pcap_file`: any bytes read as a pcap file's frames or fail
/// with a message, never panic or allocate past the bytes given; every
/// frame read fits in the bytes and in a capture's largest record.
pub fn file(data: &[u8]) {
    match frames_of(data) {
        Err(e) => assert!(!e.is_empty(), "an error without a message"),
        Ok(frames) => {
            let total: usize = frames.iter().map(Vec::len).sum();
            assert!(total <= data.len(), "{total} bytes of frames read from {} bytes", data.len());
            assert!(frames.iter().all(|f| f.len() <= SNAPLEN as usize), "a frame past the snap length");
        }
    }
}
