//! [`Ports`] of a running node: the ports its workers count
//! (`sluice_port_*` metric families, summed over workers) and, for a port
//! that is a kernel interface, what the kernel says of it.
//!
//! Contract. Reads: the node's port metrics (through the closure it is
//! given) and each interface's flags, carrier and MAC address (ioctls in
//! the calling thread's network namespace). Writes: an interface's
//! IFF_UP flag (Set of `config/enabled`), as `ip link set down` does:
//! the node's loop then stops using the port until it is up again, and
//! the link partner loses its carrier, as with a disabled switch port.
//! A port that is not a kernel interface (a pcap file, packet I/O
//! carried over a socket) is always enabled, up when the node says so,
//! and cannot be disabled.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::SystemTime;

use sluice_dataplane::Metrics;

use crate::{Counters, PortState, Ports};

/// The closure that reads the node's port metrics.
type ReadMetrics = Box<dyn Fn() -> Metrics + Send + Sync>;

/// The ports of a node (see the module documentation).
pub struct NodePorts {
    metrics: ReadMetrics,
    /// Per interface: the oper-status last seen and when it changed.
    seen: Mutex<HashMap<String, (bool, u64)>>,
    started: u64,
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl NodePorts {
    /// Ports read from what `metrics` returns (the node's I/O metrics).
    pub fn new(metrics: impl Fn() -> Metrics + Send + Sync + 'static) -> NodePorts {
        NodePorts { metrics: Box::new(metrics), seen: Mutex::new(HashMap::new()), started: now_ns() }
    }
}

/// The per-port values of the node's metrics, by (port, interface).
fn per_port(m: &Metrics) -> BTreeMap<(u32, String), HashMap<String, u64>> {
    let mut out: BTreeMap<(u32, String), HashMap<String, u64>> = BTreeMap::new();
    for f in m.families() {
        if !f.name.starts_with("sluice_port_") {
            continue;
        }
        for s in &f.samples {
            let label = |k: &str| s.labels.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
            let (Some(port), Some(iface)) = (label("port").and_then(|p| p.parse().ok()), label("interface")) else {
                continue;
            };
            let key = match label("reason") {
                Some(r) => format!("{}:{r}", f.name),
                None => f.name.clone(),
            };
            *out.entry((port, iface.to_string())).or_default().entry(key).or_default() += s.value as u64;
        }
    }
    out
}

impl Ports for NodePorts {
    fn snapshot(&self) -> Vec<PortState> {
        let m = (self.metrics)();
        let now = now_ns();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for ((id, name), v) in per_port(&m) {
            let get = |k: &str| v.get(k).copied().unwrap_or(0);
            let in_pkts = get("sluice_port_received_packets_total");
            let out_pkts = get("sluice_port_sent_packets_total");
            let (in_mc, in_bc) = (
                get("sluice_port_received_multicast_packets_total"),
                get("sluice_port_received_broadcast_packets_total"),
            );
            let (out_mc, out_bc) =
                (get("sluice_port_sent_multicast_packets_total"), get("sluice_port_sent_broadcast_packets_total"));
            let counters = Counters {
                in_octets: get("sluice_port_received_bytes_total"),
                in_pkts,
                in_unicast_pkts: in_pkts.saturating_sub(in_mc + in_bc),
                in_multicast_pkts: in_mc,
                in_broadcast_pkts: in_bc,
                in_discards: get("sluice_port_dropped_packets_total:kernel"),
                in_errors: get("sluice_port_invalid_frames_total"),
                out_octets: get("sluice_port_sent_bytes_total"),
                out_pkts,
                out_unicast_pkts: out_pkts.saturating_sub(out_mc + out_bc),
                out_multicast_pkts: out_mc,
                out_broadcast_pkts: out_bc,
                out_discards: get("sluice_port_dropped_packets_total:send_failed"),
                out_errors: 0,
            };
            let loop_up = get("sluice_port_up") > 0;
            // The kernel's word is taken at once; the loop notices a change
            // within a second.
            let (admin_up, oper_up, mac) = match sluice_ports::interface_state(&name) {
                Ok(k) => (k.admin_up, k.oper_up && loop_up, k.mac),
                Err(_) => (true, loop_up, None),
            };
            let entry = seen.entry(name.clone()).or_insert((oper_up, self.started));
            if entry.0 != oper_up {
                *entry = (oper_up, now);
            }
            out.push(PortState { name, id, mac, admin_up, oper_up, last_change: entry.1, counters });
        }
        out
    }

    fn set_enabled(&self, name: &str, up: bool) -> Result<(), String> {
        if sluice_ports::interface_state(name).is_err() {
            return Err("not a kernel interface: it cannot be disabled".into());
        }
        sluice_ports::set_interface_up(name, up).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_counters_come_from_the_port_families_summed_over_workers() {
        let ports = NodePorts::new(|| {
            let mut m = Metrics::new();
            for _worker in 0..2 {
                let l = [("port", "3"), ("interface", "no-such-if0")];
                m.counter("sluice_port_received_packets_total", "", &l, 10);
                m.counter("sluice_port_received_bytes_total", "", &l, 1000);
                m.counter("sluice_port_received_broadcast_packets_total", "", &l, 1);
                m.counter("sluice_port_received_multicast_packets_total", "", &l, 2);
                m.counter("sluice_port_sent_packets_total", "", &l, 4);
                let k = [("port", "3"), ("interface", "no-such-if0"), ("reason", "kernel")];
                m.counter("sluice_port_dropped_packets_total", "", &k, 5);
            }
            m.gauge("sluice_port_up", "", &[("port", "3"), ("interface", "no-such-if0")], 1.0);
            m.counter("sluice_worker_received_packets_total", "", &[("worker", "0")], 99);
            m
        });
        let s = ports.snapshot();
        assert_eq!(s.len(), 1);
        let p = &s[0];
        assert_eq!((p.name.as_str(), p.id, p.admin_up, p.oper_up), ("no-such-if0", 3, true, true));
        assert_eq!(p.counters.in_pkts, 20);
        assert_eq!(p.counters.in_octets, 2000);
        assert_eq!(
            (p.counters.in_unicast_pkts, p.counters.in_multicast_pkts, p.counters.in_broadcast_pkts),
            (14, 4, 2)
        );
        assert_eq!(p.counters.in_discards, 10);
        assert_eq!(p.counters.out_unicast_pkts, 8);
        assert!(ports.set_enabled("no-such-if0", false).unwrap_err().contains("not a kernel interface"));
    }
}
