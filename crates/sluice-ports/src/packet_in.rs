//! bmv2's packet I/O over a nanomsg PAIR socket (`--packet-in ADDR`): one
//! socket carries the frames of every port, each message naming its port.
//! PTF's `nn` platform (`ptf --platform nn --device-socket 0-{1,2}@ADDR`)
//! is the usual peer.
//!
//! Message layout (bmv2's, host byte order, which is little-endian on the
//! machines Sluice runs on): three 32-bit integers `type`, `port`, `more`,
//! then, for frames, the frame itself:
//!
//! | type | name | `more` | from |
//! |---|---|---|---|
//! | 0 | PORT_ADD | 0 | peer |
//! | 1 | PORT_REMOVE | 0 | peer |
//! | 2 | PORT_SET_STATUS | 0 down, 1 up | peer |
//! | 3 | PACKET_IN | frame length | peer: a frame entering on `port` |
//! | 4 | PACKET_OUT | frame length | switch: a frame leaving by `port` |
//! | 5 | INFO_REQ | info type | peer |
//! | 6 | INFO_REP | info type, then a 32-bit status | switch |
//!
//! As bmv2 (which does not enforce ports unless told to): a frame is taken
//! on any port from 0 to 510 whether or not the peer added the port, and
//! the port messages are accepted and have no effect on forwarding;
//! `INFO_REQ` is answered "not supported" (status 1), as bmv2 answers it.
//! A message that is too short, of an unknown type, for a port out of
//! range or whose length disagrees with its frame is dropped and counted
//! ([`crate::PortStats::rx_invalid`]).
//!
//! One port object serves every port number: [`Port::recv`] tags each
//! frame of the batch with its port ([`crate::RxBatch::port_of`]) and
//! [`Port::send_to`] sends with one.

use std::io;
use std::os::fd::RawFd;

use sluice_nanomsg::pair::Pair;

use crate::{Port, PortStats, RxBatch, VnetHdr, BATCH};

const PORT_ADD: i32 = 0;
const PORT_REMOVE: i32 = 1;
const PORT_SET_STATUS: i32 = 2;
const PACKET_IN: i32 = 3;
const PACKET_OUT: i32 = 4;
const INFO_REQ: i32 = 5;
const INFO_REP: i32 = 6;
const INFO_NOT_SUPPORTED: i32 = 1;
/// Bytes of the message header.
const HEADER: usize = 12;
/// Ports a frame may name (511 is the drop port).
const PORTS: i32 = 511;

/// One message from the peer, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// A port added, removed or set up or down (accepted, no effect).
    Port,
    /// A frame entering on `port` (0 to 510).
    Frame { port: u32, frame: &'a [u8] },
    /// An information request (answered "not supported").
    InfoRequest { port: i32, info: i32 },
    /// Too short, of an unknown type, for a port out of range, or with a
    /// length that is not its frame's.
    Invalid,
}

/// Reads one message of the peer's (see the module documentation).
pub fn decode(m: &[u8]) -> Message<'_> {
    if m.len() < HEADER {
        return Message::Invalid;
    }
    let int = |i: usize| i32::from_le_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
    let (ty, port, more) = (int(0), int(4), int(8));
    match ty {
        PORT_ADD | PORT_REMOVE | PORT_SET_STATUS => Message::Port,
        PACKET_IN => {
            let frame = &m[HEADER..];
            if !(0..PORTS).contains(&port) || usize::try_from(more) != Ok(frame.len()) {
                return Message::Invalid;
            }
            Message::Frame { port: port as u32, frame }
        }
        INFO_REQ => Message::InfoRequest { port, info: more },
        _ => Message::Invalid,
    }
}

/// The packet I/O socket as a port (see the module documentation).
pub struct PacketInPort {
    pair: Pair,
    name: String,
    stats: PortStats,
}

impl PacketInPort {
    /// Binds `addr` (`ipc://PATH` or `tcp://HOST:PORT`).
    pub fn bind(addr: &str) -> io::Result<PacketInPort> {
        let pair = Pair::bind(addr).map_err(io::Error::other)?;
        Ok(PacketInPort { name: pair.address().to_string(), pair, stats: PortStats::default() })
    }

    fn header(ty: i32, port: i32, more: i32) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[0..4].copy_from_slice(&ty.to_le_bytes());
        h[4..8].copy_from_slice(&port.to_le_bytes());
        h[8..12].copy_from_slice(&more.to_le_bytes());
        h
    }
}

impl Port for PacketInPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "packet_in"
    }

    fn offload(&self) -> bool {
        false
    }

    fn fd(&self) -> RawFd {
        self.pair.fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let mut n = 0;
        // Port messages count toward the round too: a burst of them ends
        // the call, and the descriptor stays readable for the rest.
        for _ in 0..BATCH {
            let Some(m) = self.pair.recv() else { break };
            match decode(&m) {
                Message::Port => {}
                Message::Frame { port, frame } => {
                    batch.put(n, frame, &VnetHdr::default());
                    batch.tag(n, port);
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += frame.len() as u64;
                    n += 1;
                }
                Message::InfoRequest { port, info } => {
                    let status = INFO_NOT_SUPPORTED.to_le_bytes();
                    self.pair.send_parts(&[&Self::header(INFO_REP, port, info), &status]);
                }
                Message::Invalid => self.stats.rx_invalid += 1,
            }
        }
        batch.set_len(n);
        Ok(n)
    }

    fn send(&mut self, _frame: &[u8], _vnet: &VnetHdr) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::InvalidInput, "a packet-in socket sends frames with their port (send_to)"))
    }

    fn send_to(&mut self, port: u32, _origin: u64, frame: &[u8], _vnet: &VnetHdr) -> io::Result<()> {
        let h = Self::header(PACKET_OUT, port as i32, frame.len() as i32);
        if self.pair.send_parts(&[&h, frame]) {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += frame.len() as u64;
        } else {
            self.stats.tx_dropped += 1;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    fn sp(m: &[u8]) -> Vec<u8> {
        let mut v = vec![1u8];
        v.extend_from_slice(&(m.len() as u64).to_be_bytes());
        v.extend_from_slice(m);
        v
    }

    fn msg(ty: i32, port: i32, more: i32, data: &[u8]) -> Vec<u8> {
        let mut m = PacketInPort::header(ty, port, more).to_vec();
        m.extend_from_slice(data);
        m
    }

    #[test]
    fn frames_enter_tagged_with_their_port_and_leave_with_theirs_and_bad_messages_are_counted() {
        let dir = std::env::temp_dir().join(format!("sluice-packet-in-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut port = PacketInPort::bind(&format!("ipc://{}/s.ipc", dir.display())).unwrap();
        let mut c = UnixStream::connect(dir.join("s.ipc")).unwrap();
        c.write_all(&[0, b'S', b'P', 0, 0, 0x10, 0, 0]).unwrap();
        let mut h = [0u8; 8];
        c.read_exact(&mut h).unwrap();
        let mut bytes = Vec::new();
        for m in [
            msg(PORT_ADD, 1, 0, b""),
            msg(PACKET_IN, 1, 3, b"abc"),
            msg(PACKET_IN, 2, 2, b"de"),
            msg(PACKET_IN, 2, 5, b"short"[..4].as_ref()),
            msg(PACKET_IN, 600, 1, b"x"),
            msg(9, 1, 0, b""),
            b"tiny".to_vec(),
            msg(INFO_REQ, 7, 0, b""),
        ] {
            bytes.extend(sp(&m));
        }
        c.write_all(&bytes).unwrap();
        let mut batch = RxBatch::new(2048);
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(60);
        while port.stats().rx_packets + port.stats().rx_invalid < 6 {
            assert!(Instant::now() < end, "the messages never arrived");
            batch.untag();
            let n = port.recv(&mut batch).unwrap();
            for i in 0..n {
                got.push((batch.port_of(i), batch.frame(i).0.to_vec()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(got, vec![(Some(1), b"abc".to_vec()), (Some(2), b"de".to_vec())]);
        assert_eq!(port.stats().rx_invalid, 4, "bad length, port, type and size");
        // The info request's answer, then a frame out.
        let mut rep = [0u8; 9 + 16];
        c.read_exact(&mut rep).unwrap();
        assert_eq!(&rep[9..], &msg(INFO_REP, 7, 0, &1i32.to_le_bytes())[..]);
        port.send_to(5, 0, b"xyz", &VnetHdr::default()).unwrap();
        let mut out = [0u8; 9 + 15];
        c.read_exact(&mut out).unwrap();
        assert_eq!(&out[9..], &msg(PACKET_OUT, 5, 3, b"xyz")[..]);
        assert_eq!(port.stats().tx_packets, 1);
    }
}
