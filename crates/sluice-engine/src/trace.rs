//! The per-packet trace: what each packet did, as events, and the two
//! forms users read it in: bmv2's per-packet log lines and bmv2's event
//! stream messages (`--nanolog`).
//!
//! Contract. Written by: the interpreter and the switch's stages while a
//! trace is on ([`crate::Switch::set_trace`]; generated code never runs
//! then). Holds: the events since the last drain, each stamped with its
//! packet's id and copy id (bmv2's `[id.copy]`: ids count received,
//! resubmitted and recirculated packets from 0; a packet itself is copy
//! 0, and each clone or multicast replica made of it takes the next copy
//! id of its packet id, 1, 2..., in the order they are made, as bmv2
//! numbers them). Leaves: [`Trace::render_log`] gives bmv2's log lines (level and
//! text, without the time and thread prefix a logger adds),
//! [`Trace::encode_events`] bmv2's event messages (the 40-byte header and
//! its body, little-endian, with the program's JSON ids), and
//! [`Trace::take_text`] the plain text the STF runner prints.
//!
//! Which events: packet in and out, parser start, state, extract and done
//! (and its error), pipeline start and done, conditions with their value,
//! tables applied (key, hit with the entry handle or miss, the action and
//! its data), actions executed, deparser start, checksum update, emit and
//! done; drops, clones, resubmits, recirculations and multicast as log lines.

use sluice_dataplane::Level;

use crate::plan::Plan;

/// One thing a packet did. Indices are the plan's (tables, actions,
/// conditions, parse states, layout headers, checksums).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    PacketIn {
        port: u32,
        len: usize,
    },
    ParserStart {
        egress: bool,
    },
    ParserState {
        state: u32,
    },
    Extract {
        header: u32,
    },
    ParserError {
        error: String,
    },
    ParserDone {
        egress: bool,
    },
    PipelineStart {
        egress: bool,
    },
    PipelineDone {
        egress: bool,
    },
    Condition {
        cond: u32,
        value: bool,
    },
    /// A table applied: its key bytes, the entry hit (handle) or `None`
    /// for a miss, and the action run with its data (`None` for a miss
    /// without a default action).
    Table {
        table: u32,
        key: Vec<u8>,
        hit: Option<u32>,
        action: Option<(u32, Vec<u8>)>,
    },
    Action {
        action: u32,
    },
    DeparserStart {
        egress: bool,
    },
    ChecksumUpdate {
        checksum: u32,
    },
    Emit {
        header: u32,
    },
    DeparserDone {
        egress: bool,
    },
    PacketOut {
        port: u32,
        len: usize,
    },
    /// A `log_msg` of the program (info level).
    UserLog(String),
    /// Anything else, as a log line at debug level.
    Note(String),
}

/// The trace of the packets run since the last drain (see the module
/// documentation).
#[derive(Debug, Default, Clone)]
pub struct Trace {
    events: Vec<((u64, u64), Event)>,
    /// The packet events are stamped with now.
    current: (u64, u64),
    /// The id the next received packet gets.
    next_packet: u64,
    /// Copies made so far of each packet id that made any (since the last drain).
    copies: Vec<(u64, u64)>,
}

impl Trace {
    /// An empty trace; the first packet gets id 0.
    pub fn new() -> Trace {
        Trace::default()
    }

    /// Adds an event of the current packet.
    pub fn push(&mut self, e: Event) {
        self.events.push((self.current, e));
    }

    /// Adds a note (a debug log line) of the current packet.
    pub fn note(&mut self, text: String) {
        self.push(Event::Note(text));
    }

    /// A packet enters ingress with the next id: one received on `port`
    /// (`arrived`, `len` bytes), or one resubmitted or recirculated, which
    /// starts over as a packet of its own (`again` says how, as a note).
    pub fn new_packet(&mut self, port: u32, len: usize, arrived: bool, again: impl FnOnce() -> String) {
        self.current = (self.next_packet, 0);
        self.next_packet += 1;
        if arrived {
            self.push(Event::PacketIn { port, len });
        } else {
            self.note(again());
        }
    }

    /// The packet (id, copy id) events are stamped with now.
    pub fn current(&self) -> (u64, u64) {
        self.current
    }

    /// Stamps the events that follow with `stamp` (a queued copy's, as its
    /// egress starts).
    pub fn set_current(&mut self, stamp: (u64, u64)) {
        self.current = stamp;
    }

    /// The stamp of a new copy (clone or multicast replica) of the current
    /// packet: its id, and the next copy id of that id.
    pub fn new_copy(&mut self) -> (u64, u64) {
        let id = self.current.0;
        let n = match self.copies.iter_mut().find(|(i, _)| *i == id) {
            Some(e) => {
                e.1 += 1;
                e.1
            }
            None => {
                self.copies.push((id, 1));
                1
            }
        };
        (id, n)
    }

    /// Whether nothing was traced since the last drain.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Forgets the events (the ids go on).
    pub fn clear(&mut self) {
        self.events.clear();
        self.copies.clear();
    }

    /// bmv2's per-packet log lines for the events, at `min` or above, each
    /// handed to `to` with its level: `[id.copy] [cxt 0] text` (a key or an
    /// entry dump is one line holding newlines, as bmv2's).
    pub fn render_log(&self, plan: &Plan, min: Level, to: &mut dyn FnMut(Level, &str)) {
        let mut line = String::new();
        for ((id, copy), e) in &self.events {
            for (level, text) in log_lines(plan, e) {
                if level >= min {
                    line.clear();
                    use std::fmt::Write;
                    let _ = write!(line, "[{id}.{copy}] [cxt 0] {text}");
                    to(level, &line);
                }
            }
        }
    }

    /// bmv2's event messages for the events (those bmv2 has: notes and
    /// parser states have none), for switch `device_id`, each handed to `to`.
    pub fn encode_events(&self, plan: &Plan, device_id: u64, to: &mut dyn FnMut(&[u8])) {
        let mut m = Vec::with_capacity(48);
        for ((id, copy), e) in &self.events {
            let body: (i32, [i32; 2], usize) = match e {
                Event::PacketIn { port, .. } => (0, [*port as i32, 0], 1),
                Event::PacketOut { port, .. } => (1, [*port as i32, 0], 1),
                Event::ParserStart { egress } => (2, [plan.elements.parser(*egress).1 as i32, 0], 1),
                Event::ParserDone { egress } => (3, [plan.elements.parser(*egress).1 as i32, 0], 1),
                Event::Extract { header } => (4, [plan.elements.headers[*header as usize] as i32, 0], 1),
                Event::DeparserStart { egress } => (5, [plan.elements.deparser(*egress).1 as i32, 0], 1),
                Event::DeparserDone { egress } => (6, [plan.elements.deparser(*egress).1 as i32, 0], 1),
                Event::Emit { header } => (7, [plan.elements.headers[*header as usize] as i32, 0], 1),
                Event::ChecksumUpdate { checksum } => (8, [plan.elements.checksums[*checksum as usize] as i32, 0], 1),
                Event::PipelineStart { egress } => (9, [plan.elements.pipelines[usize::from(*egress)].1 as i32, 0], 1),
                Event::PipelineDone { egress } => (10, [plan.elements.pipelines[usize::from(*egress)].1 as i32, 0], 1),
                Event::Condition { cond, value } => {
                    (11, [plan.elements.conds[*cond as usize] as i32, i32::from(*value)], 2)
                }
                Event::Table { table, hit: Some(h), .. } => {
                    (12, [plan.tables[*table as usize].id as i32, *h as i32], 2)
                }
                Event::Table { table, hit: None, .. } => (13, [plan.tables[*table as usize].id as i32, 0], 1),
                Event::Action { action } => (14, [plan.actions[*action as usize].id as i32, 0], 1),
                Event::ParserState { .. } | Event::ParserError { .. } | Event::UserLog(_) | Event::Note(_) => continue,
            };
            m.clear();
            header(&mut m, body.0, device_id, *id, *copy);
            for v in &body.1[..body.2] {
                m.extend_from_slice(&v.to_le_bytes());
            }
            to(&m);
        }
    }

    /// The events as the plain text lines of [`Trace::render_log`] at
    /// every level, one per line (the STF runner's and tests' form), and
    /// forgets them.
    pub fn take_text(&mut self, plan: &Plan) -> String {
        let mut out = String::new();
        self.render_log(plan, Level::Trace, &mut |_, l| {
            out.push_str(l);
            out.push('\n');
        });
        self.events.clear();
        self.copies.clear();
        out
    }
}

/// bmv2's event message header: type, switch id, context 0, signature 0,
/// packet id, copy id (40 bytes, little-endian, packed).
fn header(m: &mut Vec<u8>, kind: i32, device_id: u64, id: u64, copy: u64) {
    m.extend_from_slice(&kind.to_le_bytes());
    m.extend_from_slice(&device_id.to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&0u64.to_le_bytes());
    m.extend_from_slice(&id.to_le_bytes());
    m.extend_from_slice(&copy.to_le_bytes());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Action data as bmv2 prints it: each parameter in hex without leading
/// zeros, each followed by a comma.
fn action_data(plan: &Plan, action: u32, data: &[u8]) -> String {
    let a = &plan.actions[action as usize];
    let mut out = String::new();
    for (off, len) in &a.param_layout {
        let v = data.get(*off as usize..(*off + *len) as usize).unwrap_or(&[]);
        let h = hex(v);
        let t = h.trim_start_matches('0');
        out.push_str(if t.is_empty() { "0" } else { t });
        out.push(',');
    }
    out
}

/// The log lines bmv2 prints for one event.
fn log_lines(plan: &Plan, e: &Event) -> Vec<(Level, String)> {
    use Level::{Debug, Error, Trace};
    let el = &plan.elements;
    match e {
        Event::PacketIn { port, .. } => vec![(Debug, format!("Processing packet received on port {port}"))],
        Event::ParserStart { egress } => vec![(Debug, format!("Parser '{}': start", el.parser(*egress).0))],
        Event::ParserState { state } => {
            let s = &plan.states[*state as usize];
            vec![(Debug, format!("Parser '{}' entering state '{}'", el.parser_of_state(*state), s.name))]
        }
        Event::Extract { header } => {
            vec![(Debug, format!("Extracting header '{}'", plan.layout.headers[*header as usize].name))]
        }
        Event::ParserError { error } => vec![(Error, format!("Exception while parsing: {error}"))],
        Event::ParserDone { egress } => vec![(Debug, format!("Parser '{}': end", el.parser(*egress).0))],
        Event::PipelineStart { egress } => {
            vec![(Debug, format!("Pipeline '{}': start", el.pipelines[usize::from(*egress)].0))]
        }
        Event::PipelineDone { egress } => {
            vec![(Debug, format!("Pipeline '{}': end", el.pipelines[usize::from(*egress)].0))]
        }
        Event::Condition { cond, value } => {
            let c = &plan.conds[*cond as usize];
            vec![(Trace, format!("Condition \"{}\" ({}) is {value}", c.source.as_deref().unwrap_or(&c.name), c.name))]
        }
        Event::Table { table, key, hit, action } => {
            let t = &plan.tables[*table as usize];
            let mut v = vec![(Trace, format!("Applying table '{}'", t.name))];
            if !t.key.is_empty() {
                let mut dump = String::from("Looking up key:\n");
                let width = t.key.iter().map(|k| k.name.len()).max().unwrap_or(0).max(20);
                let mut off = 0;
                for k in &t.key {
                    let n = (k.width as usize).div_ceil(8).max(1);
                    let bytes = key.get(off..off + n).unwrap_or(&[]);
                    off += n;
                    dump.push_str(&format!("* {:<width$}: {}\n", k.name, hex(bytes)));
                }
                v.push((Debug, dump));
            }
            match hit {
                Some(h) => v.push((Debug, format!("Table '{}': hit with handle {h}", t.name))),
                None => v.push((Debug, format!("Table '{}': miss", t.name))),
            }
            match action {
                Some((a, d)) => v.push((
                    Debug,
                    format!("Action entry is {} - {}", plan.actions[*a as usize].name, action_data(plan, *a, d)),
                )),
                None => v.push((Debug, format!("Table '{}': miss, no default action", t.name))),
            }
            v
        }
        Event::Action { action } => vec![(Trace, format!("Action {}", plan.actions[*action as usize].name))],
        Event::DeparserStart { egress } => vec![(Debug, format!("Deparser '{}': start", el.deparser(*egress).0))],
        Event::ChecksumUpdate { checksum } => {
            vec![(Debug, format!("Updating checksum '{}'", plan.checksums[*checksum as usize].name))]
        }
        Event::Emit { header } => {
            vec![(Debug, format!("Deparsing header '{}'", plan.layout.headers[*header as usize].name))]
        }
        Event::DeparserDone { egress } => vec![(Debug, format!("Deparser '{}': end", el.deparser(*egress).0))],
        Event::PacketOut { port, len } => {
            vec![(Debug, format!("Transmitting packet of size {len} out of port {port}"))]
        }
        Event::UserLog(t) => vec![(Level::Info, t.clone())],
        Event::Note(t) => vec![(Debug, t.clone())],
    }
}
