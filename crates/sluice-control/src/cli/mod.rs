//! The `simple_switch_CLI` command language on the runtime API.
//!
//! One line in, one answer out, with the wording of bmv2's CLI where users
//! or scripts read it (`Entry has been added with handle 0`,
//! `cntr[0]= (640 bytes, 10 packets)`). Errors say what is wrong with the
//! line; the caller adds the line number.
//!
//! A line is first parsed ([`Command::parse`], in [`parse`]) into a typed
//! command: names resolved to plan indices, numbers, addresses and keys
//! read against the program's widths. Parsing reads the program only, never
//! the state, so it gives the same command on every replica. The command's
//! variant is its access class ([`Command::access`]), and what carries it out
//! ([`exec`]) can do only what the class allows:
//!
//! - a [`Read`] answers from a `&Switch`;
//! - a [`Write`] changes per-replica state (entries, members and groups,
//!   counters, multicast, mirroring, value sets), every replica the same way;
//! - a [`SharedWrite`] changes state the replicas share (registers, meter
//!   rates), once.
//!
//! Checks that need the state (does this handle, member or cell exist) are
//! made when the command is carried out, in the order the CLI has always
//! made them; that order decides which error a line with several faults
//! gets, so two fields ([`Write::TableIndirectAdd`]'s key,
//! [`SharedWrite::MeterSetRates`]' rates) keep their parse error until then.

mod exec;
mod parse;
pub mod state;

use sluice_engine::runtime::{Entry, EntryAction, FieldMatch, MirrorSession};
use sluice_engine::Switch;

pub use parse::{parse_value, py_float};

use crate::Access;

/// A command that could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError(pub String);

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CmdError {}

/// Runs one command line on a switch and returns its answer: the
/// one-liner for a switch that is its own data plane (tests, the bench,
/// `sluice replay`, STF pass-through). A pool of workers goes through
/// [`crate::run_commands`] instead.
pub fn run(sw: &mut Switch, line: &str) -> Result<String, CmdError> {
    match Command::parse(sw, line)? {
        Command::Nothing => Ok(String::new()),
        Command::Read(r) => r.answer(sw),
        Command::Write(w) => w.apply(sw, true),
        Command::Shared(s) => s.apply(sw),
    }
}

/// One parsed command line.
#[derive(Debug, Clone)]
pub enum Command {
    /// A blank line or a comment: nothing to do, an empty answer.
    Nothing,
    Read(Read),
    Write(Write),
    Shared(SharedWrite),
}

impl Command {
    /// Parses a line against `sw`'s program (names, widths, table shapes);
    /// reads no state.
    pub fn parse(sw: &Switch, line: &str) -> Result<Command, CmdError> {
        parse::command(sw, line)
    }

    /// What the command does to the switch's state.
    pub fn access(&self) -> Access {
        match self {
            Command::Nothing | Command::Read(_) => Access::Read,
            Command::Write(_) => Access::Write,
            Command::Shared(_) => Access::WriteShared,
        }
    }
}

/// A command that only reads: answered from the master once every change
/// has landed and the workers' counters are merged in.
#[derive(Debug, Clone)]
pub enum Read {
    /// `table_num_entries`
    TableNumEntries { table: usize },
    /// `table_dump`
    TableDump { table: usize },
    /// `table_dump_entry`
    TableDumpEntry { table: usize, handle: u32 },
    /// `table_dump_entry_from_key`
    TableDumpEntryFromKey { table: usize, key: Vec<FieldMatch>, priority: i32 },
    /// `table_info`
    TableInfo { table: usize },
    /// `table_show_actions`
    TableShowActions { table: usize },
    /// `act_prof_dump_member`, `table_dump_member`
    DumpMember { profile: usize, member: u32 },
    /// `act_prof_dump_group`, `table_dump_group`
    DumpGroup { profile: usize, group: u32 },
    /// `act_prof_dump`
    ActProfDump { profile: usize },
    /// `mc_dump`
    McDump,
    /// `mirroring_get`
    MirroringGet { session: u32 },
    /// `counter_read`: `name` as the line spells it (the answer repeats
    /// it); `direct` names the table of a direct counter as bound, with its
    /// index, and `index` is then an entry handle.
    CounterRead { name: String, counter: usize, index: usize, direct: Option<(String, usize)> },
    /// `register_read`: one cell, or all of them.
    RegisterRead { name: String, register: usize, index: Option<usize> },
    /// `meter_get_rates`: `index` is a cell, or an entry handle for a direct meter.
    MeterGetRates { meter: usize, index: u32 },
    /// `show_tables`
    ShowTables,
    /// `show_actions`
    ShowActions,
    /// `show_pvs`
    ShowPvs,
    /// `pvs_get`
    PvsGet { vset: usize },
}

/// A command that changes per-replica state: made on the master, then
/// replayed by every worker in the same order.
#[derive(Debug, Clone)]
pub enum Write {
    /// `table_add`: the entry as parsed, installed as given.
    TableAdd { table: usize, entry: Entry },
    /// `table_indirect_add` (`action` a member) and
    /// `table_indirect_add_with_group` (a group). The key's parse error, if
    /// any, is reported after the member or group is checked.
    TableIndirectAdd {
        table: usize,
        profile: usize,
        action: EntryAction,
        key: Result<Vec<FieldMatch>, CmdError>,
        priority: i32,
    },
    /// `table_set_default`
    TableSetDefault { table: usize, action: u32, data: Box<[u8]> },
    /// `table_reset_default` and `table_indirect_reset_default`: the
    /// program's default back (a const one too).
    TableResetDefault { table: usize },
    /// `table_delete`
    TableDelete { table: usize, handle: u32 },
    /// `table_modify`
    TableModify { table: usize, handle: u32, action: u32, data: Box<[u8]> },
    /// `table_clear`
    TableClear { table: usize },
    /// `table_indirect_set_default`: the member's action and data become the
    /// default (copied: later changes to the member do not follow, unlike bmv2).
    TableIndirectSetDefault { table: usize, profile: usize, member: u32 },
    /// `act_prof_create_member`
    ActProfCreateMember { profile: usize, action: u32, data: Box<[u8]> },
    /// `act_prof_delete_member`
    ActProfDeleteMember { profile: usize, member: u32 },
    /// `act_prof_create_group`
    ActProfCreateGroup { profile: usize },
    /// `act_prof_delete_group`
    ActProfDeleteGroup { profile: usize, group: u32 },
    /// `act_prof_add_member_to_group` (`add`) and `act_prof_remove_member_from_group`.
    ActProfGroupMember { profile: usize, member: u32, group: u32, add: bool },
    /// `mc_mgrp_create`
    McMgrpCreate { mgid: u32 },
    /// `mc_mgrp_destroy`
    McMgrpDestroy { mgid: u32 },
    /// `mc_node_create`
    McNodeCreate { rid: u16, ports: std::collections::BTreeSet<u32>, lags: std::collections::BTreeSet<u32> },
    /// `mc_node_update`: both lists are replaced (no LAG list: none).
    McNodeUpdate { node: u32, ports: std::collections::BTreeSet<u32>, lags: std::collections::BTreeSet<u32> },
    /// `mc_set_lag_membership`: a LAG's member ports.
    McSetLagMembership { lag: u32, ports: std::collections::BTreeSet<u32> },
    /// `mc_node_associate` (`associate`) and `mc_node_dissociate`; both
    /// succeed when there is nothing to do.
    McNodeAssociate { mgid: u32, node: u32, associate: bool },
    /// `mc_node_destroy`
    McNodeDestroy { node: u32 },
    /// `mirroring_add` (a port) and `mirroring_add_mc` (a multicast group).
    MirroringAdd { session: u32, to: MirrorSession },
    /// `mirroring_delete`
    MirroringDelete { session: u32 },
    /// `counter_reset`
    CounterReset { counter: usize },
    /// `counter_write`: `(packets, bytes)`; the value lands on one replica,
    /// the others' share of the cell becomes zero.
    CounterWrite { counter: usize, index: usize, value: (u64, u64) },
    /// `pvs_add`: a value already in the set is not added again.
    PvsAdd { vset: usize, value: Vec<u8> },
    /// `pvs_remove`
    PvsRemove { vset: usize, value: Vec<u8> },
    /// `pvs_clear`
    PvsClear { vset: usize },
    /// `set_crc16_parameters`, `set_crc32_parameters`
    SetCrcParameters { calc: usize, params: sluice_engine::runtime::CrcParams },
}

/// A command that changes state the replicas share: made once, through the
/// master, after every queued change has landed.
#[derive(Debug, Clone)]
pub enum SharedWrite {
    /// `register_write`
    RegisterWrite { register: usize, index: usize, value: u128 },
    /// `register_reset`
    RegisterReset { register: usize },
    /// `meter_set_rates` (`index`: a cell, or an entry handle for a direct
    /// meter) and `meter_array_set_rates` (every cell). The rates' parse
    /// error, if any, is reported after the cell is checked.
    MeterSetRates { meter: usize, index: Option<u32>, rates: Result<Vec<(f64, u32)>, CmdError> },
}
