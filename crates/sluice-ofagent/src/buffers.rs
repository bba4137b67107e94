//! Packets kept for the controller: a packet-in whose output action asks
//! for at most `max_len` bytes (anything but OFPCML_NO_BUFFER) sends that
//! many and keeps the whole packet here under a buffer id; a packet-out
//! or flow-mod naming the id takes it back (OpenFlow 1.3.5, 7.3.7 and
//! 7.4.1).
//!
//! Contract: [`PacketBuffers::store`] keeps a frame and its input port
//! and returns an id, or the frame when every buffer is taken and none has
//! waited [`BUFFER_LIFETIME`] (the packet-in then carries the whole
//! packet with OFP_NO_BUFFER, as the specification asks); a stored
//! packet is freed by [`PacketBuffers::take`] or replaced once it has
//! waited that long. Ids carry a generation, so an id whose packet was
//! taken or replaced is refused (BUFFER_EMPTY for one taken, BUFFER_UNKNOWN
//! for one never given or replaced), never answered with another packet.
//! Memory: at most [`N_BUFFERS`] packets.
//!
//! Concurrency: owned by the agent's thread alone.

use std::time::{Duration, Instant};

/// Packets kept at once (the features reply's `n_buffers`).
pub const N_BUFFERS: usize = 256;

/// How long a kept packet waits for its controller before its buffer may
/// be reused.
pub const BUFFER_LIFETIME: Duration = Duration::from_secs(5);

struct Slot {
    frame: Vec<u8>,
    in_port: u32,
    stored: Instant,
}

/// Why [`PacketBuffers::take`] has no packet for an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoPacket {
    /// The id's packet was already taken.
    Empty,
    /// The id was never given, or its buffer was reused since.
    Unknown,
}

/// The agent's packet buffers (see the module documentation).
pub struct PacketBuffers {
    slots: Vec<Option<Slot>>,
    /// Generation of each slot's current (or last) packet; 0: the slot
    /// never held one (ids never carry generation 0).
    generation: Vec<u32>,
    next: usize,
}

impl Default for PacketBuffers {
    fn default() -> Self {
        PacketBuffers { slots: (0..N_BUFFERS).map(|_| None).collect(), generation: vec![0; N_BUFFERS], next: 0 }
    }
}

/// Slot index in the low byte, generation above: never OFP_NO_BUFFER.
fn id_of(slot: usize, generation: u32) -> u32 {
    ((generation & 0x7f_ffff) << 8) | slot as u32
}

impl PacketBuffers {
    /// Keeps `frame` received on `in_port`: its buffer id, or the frame
    /// back when every buffer holds a packet younger than
    /// [`BUFFER_LIFETIME`].
    pub fn store(&mut self, frame: Vec<u8>, in_port: u32, now: Instant) -> Result<u32, Vec<u8>> {
        for k in 0..N_BUFFERS {
            let i = (self.next + k) % N_BUFFERS;
            let free = self.slots[i].as_ref().is_none_or(|s| now.duration_since(s.stored) >= BUFFER_LIFETIME);
            if free {
                self.next = (i + 1) % N_BUFFERS;
                self.generation[i] = (self.generation[i] % 0x7f_ffff) + 1;
                self.slots[i] = Some(Slot { frame, in_port, stored: now });
                return Ok(id_of(i, self.generation[i]));
            }
        }
        Err(frame)
    }

    /// The packet kept under `id` and its input port, freeing its buffer.
    pub fn take(&mut self, id: u32) -> Result<(Vec<u8>, u32), NoPacket> {
        let i = (id & 0xff) as usize;
        if id == sluice_openflow::NO_BUFFER || i >= N_BUFFERS || id >> 8 == 0 || id >> 8 != self.generation[i] {
            return Err(NoPacket::Unknown);
        }
        // The id's own packet: here, or taken (a reuse would have moved
        // the generation on).
        self.slots[i].take().map(|s| (s.frame, s.in_port)).ok_or(NoPacket::Empty)
    }

    /// Packets kept now.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Whether no packet is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_give_back_their_packet_once_and_full_buffers_refuse() {
        let mut b = PacketBuffers::default();
        let t0 = Instant::now();
        let a = b.store(vec![1, 2, 3], 7, t0).expect("a free buffer");
        assert_ne!(a, sluice_openflow::NO_BUFFER);
        assert_eq!(b.take(a), Ok((vec![1, 2, 3], 7)));
        assert_eq!(b.take(a), Err(NoPacket::Empty), "taken already");
        assert_eq!(b.take(a ^ 0x100), Err(NoPacket::Unknown), "another generation");
        assert_eq!(b.take(sluice_openflow::NO_BUFFER), Err(NoPacket::Unknown));
        assert_eq!(b.take(7), Err(NoPacket::Unknown), "a slot that never held a packet");
        let ids: Vec<u32> = (0..N_BUFFERS).map(|i| b.store(vec![i as u8], 1, t0).expect("free")).collect();
        assert_eq!(b.len(), N_BUFFERS);
        assert_eq!(b.store(vec![9], 1, t0), Err(vec![9]), "all taken, none old enough");
        // Once a packet has waited its lifetime, its buffer is reused and
        // its old id refused.
        let later = t0 + BUFFER_LIFETIME;
        let c = b.store(vec![9], 2, later).expect("an expired buffer");
        let replaced = ids.iter().find(|id| (**id & 0xff) == (c & 0xff)).copied().expect("same slot");
        assert_eq!(b.take(replaced), Err(NoPacket::Unknown));
        assert_eq!(b.take(c), Ok((vec![9], 2)));
        assert_eq!(b.take(ids[((c & 0xff) as usize + 1) % N_BUFFERS]).map(|(_, p)| p), Ok(1));
    }
}
