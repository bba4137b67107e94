//! The control API: what every control plane of the v1model switch goes
//! through. The Thrift server, the P4Runtime server, `sluice cli` and
//! `--commands` files all reach the switch here, never its fields.
//!
//! - [`device::Device`]: the one switch the servers share (the worker pool,
//!   the program, the ports, the events going up).
//! - [`run_commands`]: `simple_switch_CLI` command lines on a pool; each
//!   command says whether it reads or changes state ([`access`]), and is
//!   answered from the master after every change has reached the workers.
//!
//! Concurrency: requests are serialized by the device's pool lock; the
//! workers apply changes between batches (see `sluice_dataplane::workers`).

pub mod device;

use std::collections::HashMap;
use std::time::Instant;

use sluice_dataplane::workers::Pool;
use sluice_engine::commands::CmdError;
use sluice_engine::Switch;

/// What a `simple_switch_CLI` command does to the switch's state.
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

/// The access of command `name` (the first word of a line). A name the
/// language does not know is a [`Access::Write`]: the master refuses it,
/// and a refused change goes nowhere else.
pub fn access(name: &str) -> Access {
    match name {
        "table_num_entries"
        | "table_dump"
        | "table_dump_entry"
        | "table_dump_entry_from_key"
        | "table_info"
        | "table_show_actions"
        | "table_dump_member"
        | "table_dump_group"
        | "act_prof_dump"
        | "act_prof_dump_member"
        | "act_prof_dump_group"
        | "mc_dump"
        | "mirroring_get"
        | "counter_read"
        | "register_read"
        | "meter_get_rates"
        | "show_tables"
        | "show_actions"
        | "show_ports"
        | "show_pvs"
        | "pvs_get"
        | "switch_info"
        | "help" => Access::Read,
        "register_write" | "register_reset" | "meter_set_rates" | "meter_array_set_rates" => Access::WriteShared,
        _ => Access::Write,
    }
}

/// Runs one `simple_switch_CLI` command on a pool (see [`run_commands`]).
pub fn run_command(pool: &mut Pool<Switch>, line: &str) -> Result<String, CmdError> {
    run_commands(pool, &[line]).pop().expect("one answer per command")
}

/// Runs command lines on a pool: reads see every change made before them
/// and the merged counters; changes are in effect on every worker when
/// this returns (the workers get all of them in one message, in order).
pub fn run_commands(pool: &mut Pool<Switch>, lines: &[&str]) -> Vec<Result<String, CmdError>> {
    let mut answers = Vec::with_capacity(lines.len());
    for line in lines {
        let cmd = line.split_whitespace().next().unwrap_or("");
        match access(cmd) {
            Access::Read => {
                // The CLI's read commands take `&mut` (they resolve names
                // through caches), so the master answers with its merged state.
                pool.flush();
                pool.merge_counters();
                answers.push(pool.master_mut().command(line));
            }
            Access::WriteShared => answers.push(pool.change_shared(|sw| sw.command(line))),
            Access::Write => {
                let line = line.to_string();
                let split = (cmd == "counter_write").then(|| zero_counter_write(&line));
                answers.push(pool.try_change(move |sw, first| match (&split, first) {
                    // A written counter value lives in one worker's share; the others start from zero.
                    (Some(zero), false) => sw.command(zero),
                    _ => sw.command(&line),
                }));
            }
        }
    }
    pool.flush();
    answers
}

/// `counter_write NAME INDEX PKTS BYTES` with both values zero.
fn zero_counter_write(line: &str) -> String {
    let t: Vec<&str> = line.split_whitespace().collect();
    if t.len() >= 5 {
        format!("{} {} {} 0 0", t[0], t[1], t[2])
    } else {
        line.to_string()
    }
}

/// When entries of tables with idle timeouts were last hit, over all
/// workers (the latest hit wins): `(table, handle) -> instant`.
pub fn last_hits(pool: &mut Pool<Switch>) -> HashMap<(usize, u32), Instant> {
    pool.flush();
    if pool.is_empty() {
        let own = sluice_engine::dataplane::CounterSnapshot::of(pool.master());
        return sluice_engine::dataplane::latest_hits(&[own]);
    }
    sluice_engine::dataplane::latest_hits(&pool.counter_snapshots())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_shared_writes_are_told_apart_by_name_not_by_substring() {
        assert_eq!(access("counter_read"), Access::Read);
        assert_eq!(access("table_dump"), Access::Read);
        assert_eq!(access("table_add"), Access::Write);
        assert_eq!(access("counter_reset"), Access::Write);
        assert_eq!(access("register_write"), Access::WriteShared);
        assert_eq!(access("meter_get_rates"), Access::Read);
        assert_eq!(access("meter_set_rates"), Access::WriteShared);
        // A name that merely contains "dump" is not a read.
        assert_eq!(access("table_dumpster"), Access::Write);
        assert_eq!(zero_counter_write("counter_write c 3 10 20"), "counter_write c 3 0 0");
    }
}
