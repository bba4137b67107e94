//! The OpenFlow switch's agent: the switch's side of its controller
//! connections, a control server of the switch's node (`sluice_node`).
//!
//! Where an OpenFlow message goes: bytes from a controller are framed,
//! HELLO-negotiated and echoed by `sluice_openflow::connection` (`agent.rs`
//! owns the sockets); a whole request is decoded with `sluice_openflow`
//! (a 1.0 peer's translated to 1.3 by `sluice_openflow::translate10`, and
//! the answers back) and handled in `requests.rs` (flow-mods, group-mods, meter-mods, port-mods,
//! packet-outs, config, roles, barriers), where a change becomes a typed
//! change of `sluice_ofswitch::OfSwitch` and reaches the workers through
//! the node's `Control` (the pool's change queue); reads are answered in
//! `replies.rs` (statistics, descriptions, features); what the switch says
//! on its own (packet-ins from the workers, flow-removed, port status) and
//! what the clock brings (flow expiry, link watching, compiling small
//! tables, standalone mode) are in `upkeep.rs`; port queues' configuration
//! and statistics in `queues.rs`; bundles (flow-mods
//! committed all or nothing) in `bundles.rs`; flow monitors (flow changes
//! told to the connections that asked) in `monitors.rs`.
//!
//! Concurrency invariants:
//! - one thread (the server's) runs the agent: its connections, packet
//!   buffers and timers need no lock;
//! - the switch is reached only through the node's `Control`, each step
//!   locking it for that step alone (never held across another step);
//! - the workers hand packet-ins over a bounded channel ([`notes`]) and
//!   wake the agent's poll at most once per batch of them; when it is
//!   full they drop and count;
//! - every queue toward a controller is bounded: a connection whose
//!   output passes [`agent::MAX_OUTPUT_BYTES`] is closed and counted.

pub mod agent;
pub mod buffers;
mod bundles;
mod monitors;
pub mod notes;
mod queues;
mod replies;
mod requests;
mod upkeep;

pub use agent::{Agent, AgentConfig, AgentStats, FailMode};
pub use notes::{packet_in_channel, Notes};
