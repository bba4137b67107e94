//! The NORMAL port's forwarding: an ordinary MAC-learning switch, what
//! an output to OFPP_NORMAL does and what the whole switch does while it
//! stands alone (fail mode standalone with no controller).
//!
//! Contract: [`MacTable::learn`] records that a unicast source address
//! was seen on a port in a VLAN (0: untagged); [`MacTable::port_of`]
//! answers where a unicast destination was last seen, if that was less
//! than [`MAC_AGING`] ago. The switch sends a frame there (nothing when
//! it is the port the frame came in on) or, for an unknown, multicast or
//! broadcast destination, floods it (every port but the input one, as
//! FLOOD does). Frames keep their VLAN tags: every port carries every
//! VLAN.
//!
//! Memory: at most [`MAC_TABLE_SIZE`] addresses; when the table is full,
//! entries older than [`MAC_AGING`] are swept out (at most once a second)
//! and while none is, new addresses are not learned (their frames are
//! flooded) and counted.
//!
//! Concurrency: each worker's replica learns from the frames it forwards
//! (its own table, no sharing); a destination one worker has not learned
//! yet is flooded by it.

use std::collections::HashMap;
use std::time::Duration;

/// Addresses a table holds (Open vSwitch's default `mac-table-size`).
pub const MAC_TABLE_SIZE: usize = 8192;

/// How long a learned address stays (Open vSwitch's default
/// `mac-aging-time`).
pub const MAC_AGING: Duration = Duration::from_secs(300);

/// A MAC learning table (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct MacTable {
    /// (VLAN id << 48 | address) -> (port, when last seen).
    entries: HashMap<u64, (u32, Duration)>,
    last_sweep: Duration,
    /// New addresses not learned because the table was full.
    pub refused: u64,
}

fn key(vid: u16, mac: [u8; 6]) -> u64 {
    mac.iter().fold(u64::from(vid & 0x0fff), |k, b| (k << 8) | u64::from(*b))
}

impl MacTable {
    /// Records that `mac` (unicast) was seen on `port` in VLAN `vid` at
    /// `now` (time since the switch started).
    pub fn learn(&mut self, vid: u16, mac: [u8; 6], port: u32, now: Duration) {
        if mac[0] & 1 != 0 {
            return;
        }
        let k = key(vid, mac);
        if let Some(e) = self.entries.get_mut(&k) {
            *e = (port, now);
            return;
        }
        if self.entries.len() >= MAC_TABLE_SIZE && now.saturating_sub(self.last_sweep) >= Duration::from_secs(1) {
            self.last_sweep = now;
            self.entries.retain(|_, (_, seen)| now.saturating_sub(*seen) < MAC_AGING);
        }
        if self.entries.len() >= MAC_TABLE_SIZE {
            self.refused += 1;
            return;
        }
        self.entries.insert(k, (port, now));
    }

    /// Where unicast `mac` of VLAN `vid` was last seen, if recently.
    pub fn port_of(&self, vid: u16, mac: [u8; 6], now: Duration) -> Option<u32> {
        if mac[0] & 1 != 0 {
            return None;
        }
        self.entries
            .get(&key(vid, mac))
            .filter(|(_, seen)| now.saturating_sub(*seen) < MAC_AGING)
            .map(|(port, _)| *port)
    }

    /// Addresses held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no address is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    #[test]
    fn learns_per_vlan_moves_ages_and_stays_bounded() {
        let mut t = MacTable::default();
        let s = Duration::from_secs;
        t.learn(0, A, 1, s(0));
        assert_eq!(t.port_of(0, A, s(1)), Some(1));
        assert_eq!(t.port_of(5, A, s(1)), None, "another VLAN");
        t.learn(0, A, 3, s(2));
        assert_eq!(t.port_of(0, A, s(2)), Some(3), "moved");
        assert_eq!(t.port_of(0, A, s(2) + MAC_AGING), None, "aged out");
        t.learn(0, [0xff; 6], 1, s(3));
        t.learn(0, [1, 0, 0x5e, 0, 0, 1], 1, s(3));
        assert_eq!(t.len(), 1, "multicast and broadcast sources are not learned");
        assert_eq!(t.port_of(0, [0xff; 6], s(3)), None);
        for i in 0..MAC_TABLE_SIZE as u32 + 10 {
            let b = i.to_be_bytes();
            t.learn(1, [2, 1, b[0], b[1], b[2], b[3]], 2, s(10));
        }
        assert_eq!(t.len(), MAC_TABLE_SIZE);
        assert!(t.refused >= 10);
        // Once the old ones age out, new addresses are learned again.
        t.learn(0, B, 4, s(10) + MAC_AGING);
        assert_eq!(t.port_of(0, B, s(11) + MAC_AGING), Some(4));
        assert_eq!(t.len(), 1);
    }
}
