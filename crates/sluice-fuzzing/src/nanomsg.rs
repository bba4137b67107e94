//! bmv2's packet I/O over nanomsg (`--packet-in`): a peer's byte stream
//! cut into SP messages, and each message read.

use sluice_nanomsg::pair::{next_message, MAX_MESSAGE};
use sluice_ports::packet_in::{decode, Message};

/// Target `packet_in`: the first byte picks the framing (odd: IPC, even:
/// TCP), the rest is what a peer sent after its header. Every message cut
/// lies inside the bytes and within the size bound, the cutting always
/// moves on, and a frame read names a port from 0 to 510 and holds exactly
/// the bytes its header announced.
pub fn packet_in(data: &[u8]) {
    let Some((&first, mut rest)) = data.split_first() else { return };
    let ipc = first & 1 == 1;
    while let Ok(Some((start, end))) = next_message(rest, ipc) {
        assert!(start < end || start == end && end > 0, "a cut that does not move on");
        assert!(end <= rest.len() && end - start <= MAX_MESSAGE, "a message past the bytes or the bound");
        let m = &rest[start..end];
        if let Message::Frame { port, frame } = decode(m) {
            assert!(port < 511, "a frame on port {port}");
            assert_eq!(frame.len() + 12, m.len(), "a frame that is not the message's rest");
        }
        rest = &rest[end..];
    }
}
