//! The P4 switch's control API: what every control plane of the P4 switch goes
//! through. The Thrift server, the P4Runtime server, `sluice cli`,
//! `--commands` files, `sluice replay --then` and STF files all reach the
//! switch here and through the engine's typed runtime API
//! (`sluice_engine::runtime`), never through its fields: the switch's
//! program and state are private to the engine.
//!
//! - [`device::Device`]: the one switch the servers share (the node's
//!   control of it, the program, the ports, the events going up).
//! - [`cli`]: the `simple_switch_CLI` command language: a line becomes a
//!   typed [`cli::Command`] that knows its [`Access`], then runtime calls.
//! - [`learning`]: bmv2's learning engine (digests as `LEA|`
//!   notifications, acknowledged over Thrift).
//! - [`run_commands`]: command lines on a pool of workers, each routed by
//!   its access class; [`cli::run`] is the same on a lone switch.
//!
//! # The operations
//!
//! The runtime API (`sluice_engine::runtime`) is the vocabulary: on plan
//! indices, byte values and handles, with bmv2's runtime error codes.
//!
//! - Program (read only, fixed once loaded): `program`, `index_of`,
//!   `pack_action`, `unpack_action`, `check_match_key`, `table_has_priority`.
//! - Table entries: `add_entry` (= `prepare_entry` then `install_entry`),
//!   `modify_entry`, `delete_entry`, `clear_entries`, `set_entry_ttl`,
//!   `set_default_entry`, `reset_default_entry`; reads `entry`, `entries`,
//!   `entry_count`, `find_entry`, `default_entry`, `entry_last_hit`.
//! - Action profiles: `add_member`, `modify_member`, `delete_member`,
//!   `create_group`, `delete_group`, `group_member`, `set_group_members`;
//!   reads `member`, `members`, `group`, `groups`.
//! - Counters: `counter_write`, `counter_reset`, `entry_counter_write`,
//!   `entry_counters_reset`; reads `counter_read`, `counter_values`,
//!   `entry_counter_read`.
//! - Shared state: `register_write`, `register_reset`, `set_meter_rates`;
//!   reads `register_read`, `register_values`, `meter_rates`, `meter_index`.
//! - Replication and the rest: `mc_group_create`/`destroy`,
//!   `mc_node_create`/`update`/`destroy`/`associate`, `mirror_set`/`delete`,
//!   `vset_add`/`remove`/`clear`, `set_crc_params`, `set_trace`,
//!   `drain_trace`, `drain_digests`, `reset_state`; reads `mc_groups`,
//!   `mc_node`, `mirror_session`, `vset_values`.
//!
//! # Read and write
//!
//! A runtime method that takes `&self` reads and one that takes `&mut self`
//! writes. Writes are of two kinds ([`Access`]): per-replica state (every
//! worker keeps its own tables, profiles, counters, replication engine,
//! sessions and value sets) and shared state (registers and meters, one
//! copy for every worker). The CLI's commands carry their class in their
//! type ([`cli::Read`], [`cli::Write`], [`cli::SharedWrite`]); the servers
//! pick the session call (`sluice_node::Session`) that matches the runtime
//! method.
//!
//! # Where answers come from
//!
//! The pool's master (`Session::view`, through the node's lock) answers
//! every request. It has every change as soon as it is made, so a read of
//! entries, members or the program needs nothing more. A read of counters
//! first flushes the pending changes to the workers and waits for them, then
//! sums every worker's counters into the master (`Session::read`): the answer
//! counts every packet any worker saw. [`run_commands`] answers every
//! [`Access::Read`] command that way.
//!
//! # How a change reaches the workers
//!
//! A per-replica change is a closure over runtime calls. It is made on the
//! master first (its answer, an entry handle or an error, is the request's
//! answer) and, unless it failed there, queued in the pool's change queue
//! (`Session::change`, `Session::try_change`). That queue is the one place where a
//! table entry, like any other change, crosses from the control plane to the
//! workers: `Session::flush` (or `Session::send_pending`) sends the queued closures
//! to every worker, which replays them in order between two packet batches,
//! so no packet sees half a change. What crosses is the change as the master
//! made it: P4Runtime checks an entry once (`prepare_entry`) and queues its
//! installation (`install_entry`); a CLI line is parsed once and its typed
//! command queued; Thrift queues its `add_entry` call. A counter write keeps
//! its value on one replica and zero on the others, so that merged reads sum
//! to it. A shared change (`Session::change_shared`) waits for the queue to
//! drain (a queued entry may reset the meter it sets) and is then made once,
//! on the master. Only a new program (`Device::install`) crosses otherwise:
//! every worker gets a fresh replica, whole.
//!
//! Concurrency: requests are serialized by the node's lock
//! (`sluice_node::Control::lock`); the packet path never takes it (see
//! `sluice_dataplane::workers`).

/// An action parameter as bmv2's Thrift API returns it, and so as its CLI
/// prints it: the value's big-endian bytes without leading zero bytes, at
/// least one (a 16-bit parameter of 1 reads `01`, not `0001`).
pub fn bmv2_param_bytes(v: &[u8]) -> &[u8] {
    let first = v.iter().position(|b| *b != 0).unwrap_or(v.len().saturating_sub(1));
    &v[first..]
}

pub mod ageing;
pub mod cli;
pub mod device;
pub mod learning;

use std::collections::HashMap;
use std::time::Instant;

use sluice_engine::Switch;
use sluice_node::Session;

use cli::{CmdError, Command};

/// What a command does to the switch's state, which decides how a pool
/// carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads: answered by the master once every change has landed,
    /// with every worker's counters summed in.
    Read,
    /// Changes per-replica state (entries, groups, counters): applied to
    /// the master, then replayed by every worker.
    Write,
    /// Changes state the replicas share (registers, meter rates): applied
    /// once, through the master.
    WriteShared,
}

/// Runs one `simple_switch_CLI` command on a pool (see [`run_commands`]).
pub fn run_command(pool: &mut Session<'_, Switch>, line: &str) -> Result<String, CmdError> {
    run_commands(pool, &[line]).pop().expect("one answer per command")
}

/// Runs command lines on a pool: reads see every change made before them
/// and the merged counters; changes are in effect on every worker when
/// this returns (the workers get all of them in one message, in order). A
/// line that does not parse, or a change the master refuses, changes
/// nothing anywhere.
pub fn run_commands(pool: &mut Session<'_, Switch>, lines: &[&str]) -> Vec<Result<String, CmdError>> {
    let mut answers = Vec::with_capacity(lines.len());
    for line in lines {
        // Parsing reads only the program, which every replica shares.
        answers.push(match Command::parse(pool.view(), line) {
            Err(e) => Err(e),
            Ok(Command::Nothing) => Ok(String::new()),
            Ok(Command::Read(r)) => pool.read(|sw| r.answer(sw)),
            Ok(Command::Shared(s)) => pool.change_shared(|sw| s.apply(sw)),
            Ok(Command::Write(w)) => pool.try_change(move |sw, first| w.apply(sw, first)),
        });
    }
    pool.flush();
    answers
}

/// When entries of tables with idle timeouts were last hit, over all
/// workers (the latest hit wins): `(table, handle) -> instant`.
pub fn last_hits(pool: &mut Session<'_, Switch>) -> HashMap<(usize, u32), Instant> {
    pool.flush();
    if pool.workers() == 0 {
        let own = sluice_engine::dataplane::CounterSnapshot::of(pool.view());
        return sluice_engine::dataplane::latest_hits(&[own]);
    }
    sluice_engine::dataplane::latest_hits(&pool.counter_snapshots())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTER: &str = include_str!("../../../examples/router.json");
    const EDGE: &str = include_str!("../../../examples/edge.json");

    fn access(sw: &Switch, line: &str) -> Access {
        Command::parse(sw, line).unwrap_or_else(|e| panic!("`{line}`: {e}")).access()
    }

    #[test]
    fn reads_and_shared_writes_are_told_apart_by_the_parsed_command() {
        let sw = sluice_engine::load_switch(ROUTER).unwrap();
        assert_eq!(access(&sw, "counter_read RouterIngress.port_rx 0"), Access::Read);
        assert_eq!(access(&sw, "table_dump RouterIngress.ipv4_lpm"), Access::Read);
        assert_eq!(access(&sw, "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 0 0"), Access::Write);
        assert_eq!(access(&sw, "counter_reset RouterIngress.port_rx"), Access::Write);
        assert_eq!(access(&sw, "counter_write RouterIngress.port_rx 0 1 2"), Access::Write);
        assert_eq!(access(&sw, "mc_dump"), Access::Read);
        assert_eq!(access(&sw, "  # a comment"), Access::Read);
        let edge = sluice_engine::load_switch(EDGE).unwrap();
        assert_eq!(access(&edge, "register_write EdgeIngress.last_len 1 7"), Access::WriteShared);
        assert_eq!(access(&edge, "register_reset last_len"), Access::WriteShared);
        assert_eq!(access(&edge, "meter_set_rates EdgeIngress.policer 0 0.5:100 1:200"), Access::WriteShared);
        assert_eq!(access(&edge, "meter_array_set_rates EdgeIngress.policer 0.5:100 1:200"), Access::WriteShared);
        assert_eq!(access(&edge, "meter_get_rates EdgeIngress.policer 0"), Access::Read);
        assert_eq!(access(&edge, "register_read EdgeIngress.last_len 1"), Access::Read);
        // A name that merely contains "dump" is no command at all.
        assert_eq!(Command::parse(&sw, "table_dumpster x").unwrap_err().0, "Unknown command \"table_dumpster\"");
    }

    #[test]
    fn a_counter_write_keeps_its_value_on_one_replica() {
        let mut sw = sluice_engine::load_switch(ROUTER).unwrap();
        let Ok(Command::Write(w)) = Command::parse(&sw, "counter_write RouterIngress.port_rx 3 10 20") else {
            panic!("counter_write is a write");
        };
        w.apply(&mut sw, false).unwrap();
        assert_eq!(sw.counter_read(0, 3).unwrap(), (0, 0));
        w.apply(&mut sw, true).unwrap();
        assert_eq!(sw.counter_read(0, 3).unwrap(), (10, 20));
    }
}
