//! The applications that ship with the library.
//!
//! - [`LearningSwitch`] (`l2`, cbench's workload): learns each source
//!   MAC's port per switch; a packet-in for a known destination installs
//!   a flow (in_port, source and destination MAC to that port, as os-ken's
//!   `simple_switch_13`, idle for [`LEARNED_IDLE_TIMEOUT`] seconds at
//!   most) that also sends
//!   the buffered packet on (or a packet-out when the switch did not
//!   buffer it); an unknown destination is flooded with a packet-out. On
//!   a 1.3 switch it installs the table-miss flow to the controller
//!   first (1.3 switches send nothing to the controller without one).
//! - [`Hub`] (`hub`): floods every packet-in.
//! - [`FastReply`] (`fast-reply`): answers every packet-in with one fixed
//!   flow-mod (libfluid's "cbench fast reply"): the library's ceiling.
//! - [`Router`] (`router`): proactive routing for the topology of Sluice's
//!   router example: when a switch comes up it installs one flow per
//!   subnet (10.0.1.0/24 on port 1, 10.0.2.0/24 on port 2) that rewrites
//!   the MACs to the port's router address and the host's, decrements
//!   the TTL (OpenFlow 1.3; 1.0 has no such action) and sends the packet
//!   out; nothing reaches the controller afterwards.
//! - [`Chain`]: several applications in one controller, each called in
//!   turn for every event.

use hashbrown::HashMap;

use crate::mac_table::{mac_key, MacTable};

use sluice_openflow::{
    flow_mod_command, port, Action, FlowMod, Instruction, Match, Oxm, OxmField, PacketOut, NO_BUFFER, OFP13,
};

use crate::server::{Event, PacketIn, Switch};
use crate::App;

/// The shipped applications' names, for `--app`.
pub const APPS: &[&str] = &["l2", "hub", "fast-reply", "router"];

/// Makes one instance of an application.
pub type MakeApp = fn() -> Box<dyn App>;

/// A maker of the application named `name` (see [`APPS`]).
pub fn app_by_name(name: &str) -> Option<MakeApp> {
    Some(match name {
        "l2" => || Box::<LearningSwitch>::default(),
        "hub" => || Box::new(Hub),
        "fast-reply" => || Box::<FastReply>::default(),
        "router" => || Box::new(Router),
        _ => return None,
    })
}

/// Several applications, called in order for every event.
pub struct Chain(pub Vec<Box<dyn App>>);

impl App for Chain {
    fn event(&mut self, sw: &mut Switch<'_>, ev: &Event<'_>) {
        for a in &mut self.0 {
            a.event(sw, ev);
        }
    }
}

fn oxm(field: OxmField, value: &[u8]) -> Oxm {
    Oxm { field, value: value.to_vec(), mask: None }
}

fn flow(priority: u16, fields: Vec<Oxm>, actions: Vec<Action>, buffer_id: u32) -> FlowMod {
    FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: flow_mod_command::ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority,
        buffer_id,
        out_port: port::ANY,
        out_group: sluice_openflow::group::ANY,
        flags: 0,
        matched: Match { fields },
        instructions: vec![Instruction::ApplyActions(actions)],
    }
}

/// Sends packet-in `p` out of `to` with a packet-out (the switch's
/// buffer, or the packet's bytes when it kept none), through `po`, a
/// packet-out kept for reuse.
fn send_out(sw: &mut Switch<'_>, po: &mut PacketOut, p: &PacketIn, to: u32) {
    po.buffer_id = p.buffer_id;
    po.in_port = p.in_port;
    po.actions.clear();
    po.actions.push(Action::Output { port: to, max_len: 0 });
    po.data.clear();
    if p.buffer_id == NO_BUFFER {
        po.data.extend_from_slice(&p.data);
    }
    let _ = sw.packet_out(po);
}

fn empty_packet_out() -> PacketOut {
    PacketOut { buffer_id: NO_BUFFER, in_port: 0, actions: Vec::new(), data: Vec::new() }
}

/// The idle timeout (seconds) of the learning switch's flows: Open
/// vSwitch's MAC aging time, so a flow goes once its hosts have been quiet
/// that long (and the next frame is learned again).
pub const LEARNED_IDLE_TIMEOUT: u16 = 300;

/// Addresses learned per switch at most; a full table starts over.
const MAX_MACS: usize = 1 << 20;

/// The MAC-learning switch (`l2`).
pub struct LearningSwitch {
    macs: HashMap<u64, MacTable>,
    replies: Replies,
}

/// The learning switch's answers, kept and rewritten for each packet-in.
struct Replies {
    /// The learned flow (in_port, source, destination, output port and
    /// buffer rewritten each time).
    learned: FlowMod,
    packet_out: PacketOut,
}

impl Default for LearningSwitch {
    fn default() -> LearningSwitch {
        // As os-ken's simple_switch_13: the source in the match too, so that
        // every new source reaches the controller once per switch and is
        // learned there (a flow on in_port and destination alone would carry
        // a host's frames past switches that never learn it).
        let fields =
            vec![oxm(OxmField::InPort, &[0; 4]), oxm(OxmField::EthSrc, &[0; 6]), oxm(OxmField::EthDst, &[0; 6])];
        let mut learned = flow(1, fields, vec![Action::Output { port: 0, max_len: 0 }], NO_BUFFER);
        learned.idle_timeout = LEARNED_IDLE_TIMEOUT;
        LearningSwitch { macs: HashMap::new(), replies: Replies { learned, packet_out: empty_packet_out() } }
    }
}

/// The destination and source MAC of a frame (none when it is shorter
/// than the two).
fn macs_of(data: &[u8]) -> Option<([u8; 6], [u8; 6])> {
    let h = data.get(..12)?;
    Some((h[..6].try_into().expect("6 bytes"), h[6..12].try_into().expect("6 bytes")))
}

impl Replies {
    /// Learns `p`'s source in `table` (the switch's) and answers `p`.
    fn packet_in(&mut self, table: &mut MacTable, sw: &mut Switch<'_>, p: &PacketIn) {
        let Some((dst, src)) = macs_of(&p.data) else { return };
        let src_key = mac_key(&src);
        if src[0] & 1 == 0 {
            if table.len() >= MAX_MACS && !table.contains(src_key) {
                table.clear();
            }
            table.insert(src_key, p.in_port);
        }
        match table.get(mac_key(&dst)) {
            Some(out) if dst[0] & 1 == 0 && out != p.in_port => {
                let fm = &mut self.learned;
                fm.matched.fields[0].value.copy_from_slice(&p.in_port.to_be_bytes());
                fm.matched.fields[1].value.copy_from_slice(&src);
                fm.matched.fields[2].value.copy_from_slice(&dst);
                if let Some(Instruction::ApplyActions(a)) = fm.instructions.first_mut() {
                    a[0] = Action::Output { port: out, max_len: 0 };
                }
                fm.buffer_id = p.buffer_id;
                let _ = sw.flow_mod(fm);
                if p.buffer_id == NO_BUFFER {
                    send_out(sw, &mut self.packet_out, p, out);
                }
            }
            _ => send_out(sw, &mut self.packet_out, p, port::FLOOD),
        }
    }
}

/// On a 1.3 switch, the table-miss flow to the controller (1.3 switches
/// send nothing to the controller without one).
fn table_miss_to_controller(sw: &mut Switch<'_>) {
    if sw.version == OFP13 {
        let to_controller = Action::Output { port: port::CONTROLLER, max_len: 0xffff };
        let _ = sw.flow_mod(&flow(0, Vec::new(), vec![to_controller], NO_BUFFER));
    }
}

impl App for LearningSwitch {
    fn event(&mut self, sw: &mut Switch<'_>, ev: &Event<'_>) {
        match ev {
            Event::SwitchUp { .. } => {
                self.macs.insert(sw.dpid, MacTable::default());
                table_miss_to_controller(sw);
            }
            Event::SwitchDown => {
                self.macs.remove(&sw.dpid);
            }
            Event::PacketIn(p) => self.replies.packet_in(self.macs.entry(sw.dpid).or_default(), sw, p),
            _ => {}
        }
    }

    /// Starts loading every packet's source and destination slots, then
    /// handles them in order (the switch's table found once).
    fn packet_ins(&mut self, sw: &mut Switch<'_>, batch: &[PacketIn]) {
        let table = self.macs.entry(sw.dpid).or_default();
        for (dst, src) in batch.iter().filter_map(|p| macs_of(&p.data)) {
            table.prefetch(mac_key(&src));
            table.prefetch(mac_key(&dst));
        }
        for p in batch {
            self.replies.packet_in(table, sw, p);
        }
    }
}

/// The hub (`hub`): every packet-in flooded.
pub struct Hub;

impl App for Hub {
    fn event(&mut self, sw: &mut Switch<'_>, ev: &Event<'_>) {
        match ev {
            Event::SwitchUp { .. } => table_miss_to_controller(sw),
            Event::PacketIn(p) => send_out(sw, &mut empty_packet_out(), p, port::FLOOD),
            _ => {}
        }
    }
}

/// The fast reply (`fast-reply`): one fixed flow-mod per packet-in.
pub struct FastReply {
    reply: FlowMod,
}

impl Default for FastReply {
    fn default() -> FastReply {
        let fields = vec![oxm(OxmField::InPort, &[0; 4])];
        FastReply { reply: flow(1, fields, vec![Action::Output { port: 1, max_len: 0 }], NO_BUFFER) }
    }
}

impl App for FastReply {
    fn event(&mut self, sw: &mut Switch<'_>, ev: &Event<'_>) {
        if let Event::PacketIn(p) = ev {
            self.reply.matched.fields[0].value.copy_from_slice(&p.in_port.to_be_bytes());
            self.reply.buffer_id = p.buffer_id;
            let _ = sw.flow_mod(&self.reply);
        }
    }
}

/// One of the router example's subnets.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// The /24 prefix.
    pub prefix: [u8; 4],
    pub port: u32,
    /// The router's MAC on that port.
    pub router_mac: [u8; 6],
    /// The host's MAC behind it.
    pub host_mac: [u8; 6],
}

/// The router example's subnets, as in the example's documentation.
pub const ROUTES: [Route; 2] = [
    Route { prefix: [10, 0, 1, 0], port: 1, router_mac: [2, 0, 0, 0, 1, 0xfe], host_mac: [2, 0, 0, 0, 1, 1] },
    Route { prefix: [10, 0, 2, 0], port: 2, router_mac: [2, 0, 0, 0, 2, 0xfe], host_mac: [2, 0, 0, 0, 2, 1] },
];

/// The proactive router (`router`).
pub struct Router;

impl App for Router {
    fn event(&mut self, sw: &mut Switch<'_>, ev: &Event<'_>) {
        let Event::SwitchUp { .. } = ev else { return };
        for Route { prefix, port, router_mac, host_mac } in ROUTES {
            let fields = vec![
                oxm(OxmField::EthType, &[0x08, 0x00]),
                Oxm { field: OxmField::Ipv4Dst, value: prefix.to_vec(), mask: Some(vec![255, 255, 255, 0]) },
            ];
            let mut actions = vec![
                Action::SetField(oxm(OxmField::EthSrc, &router_mac)),
                Action::SetField(oxm(OxmField::EthDst, &host_mac)),
            ];
            if sw.version == OFP13 {
                actions.push(Action::DecNwTtl);
            }
            actions.push(Action::Output { port, max_len: 0 });
            let _ = sw.flow_mod(&flow(10, fields, actions, NO_BUFFER));
        }
    }
}
