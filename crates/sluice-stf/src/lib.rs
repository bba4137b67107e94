//! Parser for p4c "STF" (simple test framework) packet test files.
//!
//! STF files drive p4c's BMv2 test runner: they inject packets, state the
//! packets expected on each port, and install table entries or send bmv2 CLI
//! commands. This crate turns the text into typed [`StfLine`]s; it knows
//! nothing about P4 programs, so everything that depends on the BMv2 JSON
//! (table/key/action name resolution, field widths, match kinds) is left to
//! the caller, with helpers ([`KeyValue`], [`Number`], [`ExpectPattern`]) for
//! the conversions once those are known.
//!
//! Grammar summary (one command per line, keywords case-insensitive, `#`
//! starts a comment, blank lines ignored):
//!
//! ```text
//! packet <port> <hex data>
//! expect <port> [<hex data with *>] [$]
//! add <table> [<priority>] <key>:<value>[/<len>] ... <action>(<param>:<value>, ...) [= <id>]
//! setdefault <table> <action>(<param>:<value>, ...)
//! check_counter <counter>(<id or index>) [packets|bytes <op> <value>]
//! remove all | wait | no_packet
//! <bmv2 CLI command> <args...>          (mc_mgrp_create, mirroring_add, ...)
//! ```

#![warn(missing_docs)]

use std::collections::BTreeSet;
use std::fmt;

mod expect;
mod parser;
mod value;

#[cfg(test)]
mod tests;

pub use expect::ExpectPattern;
pub use value::{KeyValue, Number, Radix, ValueError};

/// A parse failure, with the 1-based line it happened on, so test authors can
/// find the offending line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StfError {
    /// 1-based line number in the STF text.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for StfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for StfError {}

/// One command of an STF file together with where it came from, so later
/// stages (resolution against the JSON, test reports) can cite the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StfLine {
    /// 1-based source line number.
    pub line: usize,
    /// The parsed command.
    pub command: StfCommand,
}

/// A parsed STF command. Names are kept as written (quotes removed); the
/// runner resolves them against the JSON (suffix matching etc.).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StfCommand {
    /// `packet <port> <data>`: inject `data` (whole Ethernet frame, no FCS)
    /// on switch port `port`.
    Packet {
        /// Ingress port (STF port N is switch port N).
        port: u32,
        /// Frame bytes.
        data: Vec<u8>,
    },
    /// `expect <port> [<pattern>]`: one packet is expected on `port`; the
    /// i-th expect of a port is compared with the i-th packet leaving it.
    Expect {
        /// Egress port.
        port: u32,
        /// `None` when no data was written: any packet is accepted.
        pattern: Option<ExpectPattern>,
    },
    /// `add ...`: install one table entry.
    Add {
        /// Table name as written (full JSON name or unique suffix).
        table: String,
        /// STF priority (larger = higher precedence); only used for
        /// ternary tables, where it is required.
        priority: Option<i64>,
        /// `(key name as written, value)` in file order. Names may contain
        /// `$N` stack indices, see [`stack_index_to_brackets`].
        keys: Vec<(String, KeyValue)>,
        /// Action name as written (full JSON name or unique suffix).
        action: String,
        /// `(parameter name, value)` in file order.
        params: Vec<(String, Number)>,
        /// Optional entry name after `=` (used by `check_counter`).
        id: Option<String>,
    },
    /// `setdefault <table> <action>(...)`: set the table's miss action.
    SetDefault {
        /// Table name as written.
        table: String,
        /// Action name as written.
        action: String,
        /// `(parameter name, value)` in file order.
        params: Vec<(String, Number)>,
    },
    /// A bmv2 runtime-CLI command passed through unchanged (see
    /// [`BMV2_CLI_COMMANDS`]): the line after comment removal, trimmed, with
    /// the command word lowercased (the bmv2 CLI is case-sensitive) and the
    /// arguments as written, e.g. `mc_node_create 400 6`.
    Passthrough {
        /// CLI command text.
        command: String,
    },
    /// `wait`: p4c's bmv2 runner ignores it (control commands always take
    /// effect before later packets).
    Wait,
    /// `check_counter <name>(<entry>) [packets|bytes <op> <value>]`.
    CheckCounter {
        /// Counter name as written.
        name: String,
        /// Which cell: an entry id (from `add ... = id`) or an index.
        entry: CounterEntry,
        /// Optional condition; without it the check is only a read.
        check: Option<CounterCheck>,
    },
    /// `remove all`: remove all table entries.
    RemoveAll,
    /// `no_packet`: expect no packet (unsupported by p4c's bmv2 runner).
    NoPacket,
}

/// The cell a `check_counter` refers to: entries named with `= id` on an
/// `add` line, or a plain counter index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterEntry {
    /// An entry id given with `add ... = <id>`.
    Id(String),
    /// A numeric counter index.
    Index(Number),
}

/// The optional condition of a `check_counter` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterCheck {
    /// Which counter component is compared.
    pub kind: CounterKind,
    /// Comparison operator.
    pub op: CompareOp,
    /// Right-hand side.
    pub value: Number,
}

/// Which half of a packets-and-bytes counter a check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// `packets`
    Packets,
    /// `bytes`
    Bytes,
}

/// Comparison operator of `check_counter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CompareOp {
    /// Evaluate `actual <op> expected`; lets a runner apply the check without
    /// re-implementing the operator table.
    pub fn holds(self, actual: u128, expected: u128) -> bool {
        match self {
            CompareOp::Eq => actual == expected,
            CompareOp::Ne => actual != expected,
            CompareOp::Lt => actual < expected,
            CompareOp::Le => actual <= expected,
            CompareOp::Gt => actual > expected,
            CompareOp::Ge => actual >= expected,
        }
    }

    /// The operator's STF spelling, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        }
    }
}

/// bmv2 runtime-CLI commands (`runtime_CLI` plus the `simple_switch_CLI` /
/// `psa_switch_CLI` additions) that STF passes through verbatim as
/// [`StfCommand::Passthrough`]. Public so a runner can tell which ones it
/// implements; any other unknown command word is a parse error.
pub const BMV2_CLI_COMMANDS: &[&str] = &[
    "act_prof_add_member_to_group",
    "act_prof_create_group",
    "act_prof_create_member",
    "act_prof_delete_group",
    "act_prof_delete_member",
    "act_prof_dump",
    "act_prof_dump_group",
    "act_prof_dump_member",
    "act_prof_modify_member",
    "act_prof_remove_member_from_group",
    "counter_read",
    "counter_reset",
    "counter_write",
    "get_time_elapsed",
    "get_time_since_epoch",
    "load_new_config_file",
    "mc_dump",
    "mc_mgrp_create",
    "mc_mgrp_destroy",
    "mc_node_associate",
    "mc_node_create",
    "mc_node_destroy",
    "mc_node_dissociate",
    "mc_node_update",
    "mc_set_lag_membership",
    "meter_array_set_rates",
    "meter_get_rates",
    "meter_set_rates",
    "mirroring_add",
    "mirroring_add_mc",
    "mirroring_delete",
    "mirroring_get",
    "port_add",
    "port_remove",
    "register_read",
    "register_reset",
    "register_write",
    "reset_state",
    "serialize_state",
    "set_crc16_parameters",
    "set_crc32_parameters",
    "set_queue_depth",
    "set_queue_rate",
    "show_actions",
    "show_ports",
    "show_tables",
    "swap_configs",
    "switch_info",
    "table_add",
    "table_clear",
    "table_delete",
    "table_dump",
    "table_dump_entry",
    "table_dump_entry_from_key",
    "table_dump_group",
    "table_dump_member",
    "table_indirect_add",
    "table_indirect_add_member_to_group",
    "table_indirect_add_with_group",
    "table_indirect_create_group",
    "table_indirect_create_member",
    "table_indirect_delete",
    "table_indirect_delete_group",
    "table_indirect_delete_member",
    "table_indirect_modify_member",
    "table_indirect_remove_member_from_group",
    "table_indirect_reset_default",
    "table_indirect_set_default",
    "table_indirect_set_default_with_group",
    "table_info",
    "table_modify",
    "table_num_entries",
    "table_reset_default",
    "table_set_default",
    "table_set_timeout",
    "table_show_actions",
    "write_config_to_file",
];

/// Parse a whole STF file. Stops at the first malformed line.
///
/// Exists as the crate's entry point: the result lists the commands in file
/// order, which is the order p4c's runner executes them in.
pub fn parse(text: &str) -> Result<Vec<StfLine>, StfError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let content = strip_comment(raw).trim();
        if content.is_empty() {
            continue;
        }
        let command = parser::parse_command(content).map_err(|message| StfError { line, message })?;
        out.push(StfLine { line, command });
    }
    Ok(out)
}

/// All ports named by `packet` and `expect` lines: the ports p4c's runner
/// attaches (and checks) for a test.
pub fn ports(lines: &[StfLine]) -> BTreeSet<u32> {
    lines
        .iter()
        .filter_map(|l| match &l.command {
            StfCommand::Packet { port, .. } | StfCommand::Expect { port, .. } => Some(*port),
            _ => None,
        })
        .collect()
}

/// Rewrite STF header-stack indices `$N` into JSON/P4 form `[N]`
/// (`extra$0.h` -> `extra[0].h`), needed to match STF key names against JSON
/// key names. Every `$` followed by decimal digits is rewritten (p4c's runner
/// only rewrites the last one, which matters only for nested stacks); other
/// `$` (e.g. `$valid$`) are left alone.
pub fn stack_index_to_brackets(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    let mut chars = name.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c == '$' && chars.peek().is_some_and(|(_, d)| d.is_ascii_digit()) {
            out.push('[');
            while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
                out.push(d);
                chars.next();
            }
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

/// Cut a `#` comment, ignoring `#` inside a double-quoted identifier.
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}
