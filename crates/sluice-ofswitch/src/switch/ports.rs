//! Ports: what the switch knows of each ([`PortInfo`]), the state bits
//! the packet path reads, per-port counts, and sending a frame to a port.
//!
//! Contract: reads the ports (their configuration and link state; for
//! ports numbered below `DENSE_PORTS`, as bits indexed by number, rebuilt
//! by every change of a port); writes the per-port counts (rx where a
//! batch enters, tx and tx-dropped here) and the switch's transmitted
//! count. A frame leaves through `emit` to a port that exists and is not
//! configured down or NO_FWD (LOCAL as live port 0); to any other it is
//! counted as tx-dropped. A frame with a queue id goes through the port's
//! queue of that id, if it has one (`queues.rs`); a full queue counts a
//! tx drop.

use sluice_openflow::port;

use super::queues::Offer;
use super::{OfSwitch, LOCAL_LIVE_PORT};

/// Ports numbered below this keep their state and counters in arrays
/// indexed by number (others in maps).
pub(super) const DENSE_PORTS: usize = 1024;
/// Bits of a port's state in [`OfSwitch::port_state`].
const PORT_EXISTS: u8 = 1;
/// PORT_DOWN or NO_FWD: what is sent there is dropped.
const PORT_CLOSED: u8 = 2;
/// PORT_DOWN or NO_RECV: what arrives there is dropped.
pub(super) const PORT_NO_RECV: u8 = 4;

/// The `PORT_*` bits of a port that exists.
fn port_bits_of(p: &PortInfo) -> u8 {
    use sluice_openflow::port_config::{NO_FWD, NO_RECV, PORT_DOWN};
    PORT_EXISTS
        | if p.config & (PORT_DOWN | NO_FWD) != 0 { PORT_CLOSED } else { 0 }
        | if p.config & (PORT_DOWN | NO_RECV) != 0 { PORT_NO_RECV } else { 0 }
}

/// A port of the switch.
#[derive(Debug, Clone, Default)]
pub struct PortInfo {
    pub name: String,
    pub hw_addr: [u8; 6],
    /// `ofp_port_config` bits (PORT_DOWN, NO_RECV, NO_FWD, NO_PACKET_IN).
    pub config: u32,
    /// Link up.
    pub live: bool,
}

impl OfSwitch {
    /// Rebuilds `port_state` from `ports`.
    pub(super) fn index_ports(&mut self) {
        self.port_state.clear();
        self.port_state.resize(DENSE_PORTS, 0);
        for (&n, p) in &self.ports {
            if let Some(s) = self.port_state.get_mut(n as usize) {
                *s = port_bits_of(p);
            }
        }
    }

    /// Port `p`'s `PORT_*` bits.
    #[inline]
    pub(super) fn port_bits(&self, p: u32) -> u8 {
        match self.port_state.get(p as usize) {
            Some(&s) => s,
            None => self.ports.get(&p).map_or(0, port_bits_of),
        }
    }

    /// Port `p`'s counters.
    #[inline]
    pub(super) fn port_count(&mut self, p: u32) -> &mut [u64; 5] {
        match self.port_counts.get_mut(p as usize) {
            Some(c) => c,
            None => self.counters.ports.entry(p).or_default(),
        }
    }

    pub(super) fn port_live(&self, p: u32) -> bool {
        self.ports.get(&p).is_some_and(|i| i.live && i.config & sluice_openflow::port_config::PORT_DOWN == 0)
    }

    /// Whether port `p` exists and takes what is sent to it (a port
    /// configured down or NO_FWD drops it).
    #[inline]
    fn sends_to(&self, p: u32) -> bool {
        self.port_bits(p) & (PORT_EXISTS | PORT_CLOSED) == PORT_EXISTS
    }

    /// Sends `f` to port `to`, through its queue `queue` when the port has
    /// one that shapes (see `queues.rs`).
    #[inline]
    pub(super) fn send<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        to: u32,
        f: &[u8],
        queue: Option<u32>,
        emit: &mut E,
    ) {
        if let (Some(q), true) = (queue, self.queues.is_some()) {
            if self.sends_to(to) {
                match self.offer_to_queue(to, q, f) {
                    Offer::Send => {}
                    Offer::Queued => return,
                    Offer::Dropped => {
                        self.port_count(to)[4] += 1;
                        return;
                    }
                }
            }
        }
        self.send_now(idx, to, f, emit)
    }

    /// Sends `f` to port `to` now.
    pub(super) fn send_now<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        to: u32,
        f: &[u8],
        emit: &mut E,
    ) {
        let ok = self.sends_to(to);
        let c = self.port_count(to);
        if ok {
            c[2] += 1;
            c[3] += f.len() as u64;
            self.stats.transmitted += 1;
            emit(idx, if to == port::LOCAL { LOCAL_LIVE_PORT } else { to }, f);
        } else {
            c[4] += 1;
        }
    }
}
