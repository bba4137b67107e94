//! `sluice ofbench`: cbench's controller benchmark, its options, its
//! bytes on the wire and its output, for OpenFlow 1.0 and 1.3.
//!
//! Contract: emulates `-s` switches, each a TCP connection to the
//! controller at `-c`:`-p` (Nagle's algorithm left on, as cbench leaves
//! it). Each sends HELLO, answers FEATURES_REQUEST (datapath id = its
//! number, from 1), GET_CONFIG, echo, barrier, the description and
//! port-description requests and role requests, and then, with `-L 1`
//! (the default), sends cbench's gratuitous ARP from MAC
//! 80:00:00:00:00:<id> on port 2 (buffer none) so a learning switch
//! knows that destination. Then it sends cbench's packet-ins (in_port 1,
//! buffer ids counting up modulo 100 000, cbench's 64-byte IPv4 frame
//! from a source MAC carrying the switch's current MAC number, little
//! endian, in bytes 1-4, to 80:00:00:00:00:<id>): in throughput mode
//! (`-t`) as many as keep 64 KiB queued toward the controller, in latency
//! mode one at a time, the next when the answer came. An answer is a
//! FLOW_MOD (add or modify-strict) or a non-LLDP PACKET_OUT.
//!
//! Timing and counting are cbench's: one `poll` over every switch asking
//! for reading and writing; per ready switch one read (whole messages
//! handled) and one write (topped up to 64 KiB first). A test runs `-m`
//! ms (plus `-D`, which is subtracted again); then, after 100 ms, each
//! switch's answers are taken and what the controller sent meanwhile is
//! read and thrown away. Each test prints the answers of each switch and
//! their total per ms; after `-l` tests the `RESULT:` line gives
//! min/max/avg/stdev of responses/s over the tests, leaving out `-w`
//! warmup and `-C` cooldown tests. A last `CHECK:` line says what the
//! answers were: flow-mods (and how many did not send the learned
//! destination to port 2), packet-outs, and ERROR messages.
//!
//! One thread drives every switch. The handshake's answers are decoded
//! and encoded by `sluice-openflow`; the packet-ins and the reading of
//! the answers, on the measured path, are written here byte by byte (a
//! packet-in copied from its template, an answer framed in place and a
//! few fields read).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The arguments, as cbench spells them.
#[derive(Debug, Clone, clap::Args)]
pub struct OfbenchArgs {
    /// Hostname of the controller to connect to.
    #[arg(short = 'c', long = "controller", default_value = "localhost")]
    pub controller: String,
    /// Controller port.
    #[arg(short = 'p', long = "port", default_value_t = 6633)]
    pub port: u16,
    /// Number of switches to emulate.
    #[arg(short = 's', long = "switches", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub switches: u32,
    /// Unique source MAC addresses per switch.
    #[arg(short = 'M', long = "mac-addresses", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub macs: u32,
    /// Loops (tests) per run.
    #[arg(short = 'l', long = "loops", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub loops: u32,
    /// Milliseconds per test.
    #[arg(short = 'm', long = "ms-per-test", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub ms: u64,
    /// Loops at the start left out of the result.
    #[arg(short = 'w', long = "warmup", default_value_t = 1)]
    pub warmup: u32,
    /// Loops at the end left out of the result.
    #[arg(short = 'C', long = "cooldown", default_value_t = 0)]
    pub cooldown: u32,
    /// Throughput mode (default: latency mode).
    #[arg(short = 't', long = "throughput")]
    pub throughput: bool,
    /// Send a gratuitous ARP first so the destination MAC is learned (1) or not (0).
    #[arg(short = 'L', long = "learn-dstmac", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub learn: u8,
    /// Milliseconds to wait after the features reply before sending packet-ins.
    #[arg(short = 'D', long = "delay", default_value_t = 0)]
    pub delay: u64,
    /// OpenFlow version: 1.0 or 1.3.
    #[arg(short = 'V', long = "of-version", default_value = "1.0")]
    pub version: String,
}

const OFP10: u8 = 1;
const OFP13: u8 = 4;
/// Bytes a switch keeps queued toward the controller in throughput mode
/// (cbench's buffer length).
const QUEUE: usize = 65536;
const LEARNED_PORT: u32 = 2;
/// Buffer ids cycle below this, as cbench's.
const BUFFER_IDS: u32 = 100_000;

#[derive(PartialEq)]
enum Stage {
    Handshake,
    /// Features answered; packet-ins start at this instant.
    Waiting(Instant),
    Ready,
}

/// Bytes between `start` and `end` of `data`: cbench's message buffer
/// (read into the tail, taken from the head, grown when full).
struct Buf {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl Buf {
    fn new() -> Buf {
        Buf { data: vec![0; QUEUE], start: 0, end: 0 }
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    /// Appends `bytes`; the copy, to write into.
    fn push(&mut self, bytes: &[u8]) -> &mut [u8] {
        if self.end + bytes.len() > self.data.len() {
            self.compact();
            if self.end + bytes.len() > self.data.len() {
                self.data.resize((self.end + bytes.len()).next_power_of_two(), 0);
            }
        }
        let at = self.end;
        self.end += bytes.len();
        let copy = &mut self.data[at..self.end];
        copy.copy_from_slice(bytes);
        copy
    }

    fn compact(&mut self) {
        self.data.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
    }

    fn consumed(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// One read from `stream` into the free tail (grown when there is
    /// none): the bytes read.
    fn read_from(&mut self, stream: &mut TcpStream) -> std::io::Result<usize> {
        if self.end == self.data.len() {
            self.compact();
            if self.end == self.data.len() {
                self.data.resize(self.data.len() * 2, 0);
            }
        }
        let n = stream.read(&mut self.data[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// The first whole message, if there is one (its length read from
    /// its header); an error for a length under 8.
    fn message(&self) -> Result<Option<&[u8]>, usize> {
        if self.len() < 8 {
            return Ok(None);
        }
        let len = usize::from(u16_at(&self.data, self.start + 2));
        if len < 8 {
            return Err(len);
        }
        Ok((self.len() >= len).then(|| &self.data[self.start..self.start + len]))
    }
}

/// One emulated switch's state; its socket and buffers are in [`Fake`].
struct State {
    id: u32,
    stage: Stage,
    xid: u32,
    buffer_id: u32,
    mac: u32,
    /// Answers outstanding (latency mode sends when none is).
    probes: i64,
    count: u64,
    /// This switch's packet-in, copied for each probe with its
    /// transaction id, buffer id and source MAC written in (as cbench
    /// copies its template).
    template: Vec<u8>,
}

struct Fake {
    stream: TcpStream,
    inbuf: Buf,
    out: Buf,
    state: State,
}

/// What the answers were, over the whole run.
#[derive(Default)]
struct Check {
    flow_mods: u64,
    /// Flow-mods with an empty match at priority 0 (a table-miss entry).
    table_miss: u64,
    wrong: u64,
    packet_outs: u64,
    errors: u64,
}

fn u16_at(m: &[u8], at: usize) -> u16 {
    m.get(at..at + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}

fn u32_at(m: &[u8], at: usize) -> u32 {
    m.get(at..at + 4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn header(out: &mut Vec<u8>, version: u8, typ: u8, len: usize, xid: u32) {
    out.extend_from_slice(&[version, typ]);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&xid.to_be_bytes());
}

/// cbench's packet-in frame: 80:00:00:00:00:01 <- 00:00:00:00:00:02,
/// IPv4 192.168.0.40 -> 192.168.1.40, protocol 255, TTL 64, total length
/// 50, and its 30 bytes of payload; 64 bytes.
const FRAME: [u8; 64] = [
    0x80, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, // Ethernet
    0x45, 0x00, 0x00, 0x32, 0x00, 0x00, 0x00, 0x00, 0x40, 0xff, 0xf7, 0x2c, // IPv4 ...
    0xc0, 0xa8, 0x00, 0x28, 0xc0, 0xa8, 0x01, 0x28, // ... addresses
    0x7a, 0x18, 0x58, 0x6b, 0x11, 0x08, 0x97, 0xf5, 0x19, 0xe2, 0x65, 0x7e, 0x07, 0xcc, 0x31, 0xc3, 0x11, 0xc7, 0xc4,
    0x0c, 0x8b, 0x95, 0x51, 0x51, 0x33, 0x54, 0x51, 0xd5, 0x00, 0x36, // payload
];

/// The frame of a packet-in: cbench's, to 80:00:00:00:00:<id>, from
/// 00:m0:m1:m2:m3:<id> where m0..m3 are `mac` little endian (cbench copies
/// the number's bytes as the machine holds them; byte 4 is then
/// overwritten by the id).
fn frame(id: u32, mac: u32) -> [u8; 64] {
    let mut f = FRAME;
    f[7..11].copy_from_slice(&mac.to_le_bytes());
    f[5] = id as u8;
    f[11] = id as u8;
    f
}

/// cbench's gratuitous ARP reply from 80:00:00:00:00:<id>, 192.168.<id>.40,
/// padded to 64 bytes.
fn garp(id: u32) -> [u8; 64] {
    let mac = [0x80, 0, 0, 0, 0, id as u8];
    let ip = [192, 168, id as u8, 40];
    let mut f = [0u8; 64];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&ip);
    f[32..38].copy_from_slice(&mac);
    f[38..42].copy_from_slice(&ip);
    f
}

/// A PACKET_IN in `version` of `data` on `in_port`.
fn packet_in(out: &mut Vec<u8>, version: u8, xid: u32, buffer_id: u32, in_port: u32, data: &[u8]) {
    if version == OFP10 {
        header(out, version, 10, 18 + data.len(), xid);
        out.extend_from_slice(&buffer_id.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&(in_port as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]); // reason NO_MATCH, pad
    } else {
        // buffer_id, total_len, reason, table, cookie, match (OXM in_port: 12 bytes, padded to 16), 2 pad.
        header(out, version, 10, 8 + 16 + 16 + 2 + data.len(), xid);
        out.extend_from_slice(&buffer_id.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&[0, 1, 0, 12, 0x80, 0, 0, 4]);
        out.extend_from_slice(&in_port.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&[0, 0]);
    }
    out.extend_from_slice(data);
}

impl State {
    fn next_xid(&mut self) -> u32 {
        let xid = self.xid;
        self.xid = self.xid.wrapping_add(1);
        xid
    }

    /// Queues the next packet-in.
    fn probe(&mut self, out: &mut Buf, macs: u32) {
        let xid = self.next_xid();
        let m = out.push(&self.template);
        m[4..8].copy_from_slice(&xid.to_be_bytes());
        m[8..12].copy_from_slice(&self.buffer_id.to_be_bytes());
        // The frame is the template's last 64 bytes; the MAC counter is in
        // bytes 1-4 of its source address.
        let src = m.len() - 64 + 7;
        m[src..src + 4].copy_from_slice(&self.mac.to_le_bytes());
        self.mac = (self.mac + 1) % macs;
        self.buffer_id = (self.buffer_id + 1) % BUFFER_IDS;
        self.probes += 1;
    }

    /// Answers one whole message from the controller.
    #[allow(clippy::too_many_arguments)]
    fn handle(
        &mut self,
        m: &[u8],
        out: &mut Buf,
        scratch: &mut Vec<u8>,
        version: u8,
        learn: bool,
        delay: Duration,
        check: &mut Check,
    ) {
        let typ = m[1];
        let ready = self.stage == Stage::Ready;
        match (version, typ) {
            (_, 1) => check.errors += 1,
            (_, 5) => {
                self.answer(m, out, scratch, version);
                if learn {
                    let xid = self.next_xid();
                    scratch.clear();
                    packet_in(scratch, version, xid, 0xffff_ffff, LEARNED_PORT, &garp(self.id));
                    out.push(scratch);
                }
                self.stage = Stage::Waiting(Instant::now() + delay);
            }
            (_, 2 | 7) | (OFP10, 16 | 18) | (OFP13, 18 | 20 | 24) => self.answer(m, out, scratch, version),
            (OFP10, 14) | (OFP13, 14) => {
                let (command, actions) = if version == OFP10 {
                    (u16_at(m, 56), 72)
                } else {
                    (u16::from(m.get(25).copied().unwrap_or(9)), 0)
                };
                if ready && (command == 0 || command == 2) {
                    self.count += 1;
                    self.probes -= 1;
                    check.flow_mods += 1;
                    if self.is_table_miss(m, version) {
                        check.table_miss += 1;
                    } else if !self.flow_mod_is_learned(m, version, actions) {
                        check.wrong += 1;
                    }
                }
            }
            (OFP10, 13) | (OFP13, 13) => {
                let (alen, at) = if version == OFP10 { (u16_at(m, 14), 16) } else { (u16_at(m, 16), 24) };
                let data = at + usize::from(alen);
                if ready && u16_at(m, data + 12) != 0x88cc {
                    self.count += 1;
                    self.probes -= 1;
                    check.packet_outs += 1;
                }
            }
            _ => {}
        }
        self.probes = self.probes.max(0);
    }

    /// Answers a request of the handshake (features, configuration,
    /// description and port descriptions, echo, barrier, role) through the
    /// codec: the switch has one port, 1 (`veth1`); statistics are empty.
    fn answer(&mut self, m: &[u8], out: &mut Buf, scratch: &mut Vec<u8>, version: u8) {
        scratch.clear();
        let mac = [2, 0, 0, 0, 1, self.id as u8];
        if version == OFP10 {
            use sluice_openflow::of10::{decode10, encode10_into, FeaturesReply10, Message10, PhyPort10};
            let Ok((xid, req)) = decode10(m) else { return };
            let reply = match req {
                Message10::EchoRequest(d) => Message10::EchoReply(d),
                Message10::FeaturesRequest => {
                    let port = PhyPort10 {
                        port_no: 1,
                        hw_addr: mac,
                        name: "veth1".into(),
                        config: 0,
                        state: 0,
                        curr: 0,
                        advertised: 0,
                        supported: 0,
                        peer: 0,
                    };
                    Message10::FeaturesReply(FeaturesReply10 {
                        datapath_id: u64::from(self.id),
                        n_buffers: 256,
                        n_tables: 1,
                        capabilities: 0xc7,
                        actions: 0xfff,
                        ports: vec![port],
                    })
                }
                Message10::GetConfigRequest => Message10::GetConfigReply { flags: 0, miss_send_len: 128 },
                Message10::BarrierRequest => Message10::BarrierReply,
                // The description (empty strings) or an empty reply.
                Message10::StatsRequest { typ, .. } => {
                    Message10::StatsReply { typ, flags: 0, body: vec![0; if typ == 0 { 1056 } else { 0 }] }
                }
                _ => return,
            };
            encode10_into(&reply, xid, scratch);
            out.push(scratch);
            return;
        }
        use sluice_openflow::{
            Desc, Features, Message, MultipartReply, MultipartRequest as Rq, PortDesc, SwitchConfig,
        };
        let Ok((h, req)) = sluice_openflow::decode(m) else { return };
        let reply = match req {
            Message::EchoRequest(d) => Message::EchoReply(d),
            Message::FeaturesRequest => Message::FeaturesReply(Features {
                datapath_id: u64::from(self.id),
                n_buffers: 256,
                n_tables: 1,
                auxiliary_id: 0,
                capabilities: 0x47,
            }),
            Message::GetConfigRequest => Message::GetConfigReply(SwitchConfig { flags: 0, miss_send_len: 128 }),
            Message::BarrierRequest => Message::BarrierReply,
            Message::RoleRequest(r) => Message::RoleReply(r),
            Message::MultipartRequest { body, .. } => {
                let body = match body {
                    Rq::Desc => MultipartReply::Desc(Desc {
                        mfr_desc: String::new(),
                        hw_desc: String::new(),
                        sw_desc: String::new(),
                        serial_num: String::new(),
                        dp_desc: String::new(),
                    }),
                    Rq::PortDesc => MultipartReply::PortDesc(vec![PortDesc {
                        port_no: 1,
                        hw_addr: mac,
                        name: "veth1".into(),
                        config: 0,
                        state: 0,
                        curr: 0,
                        advertised: 0,
                        supported: 0,
                        peer: 0,
                        curr_speed: 0,
                        max_speed: 0,
                    }]),
                    Rq::Flow(_) => MultipartReply::Flow(Vec::new()),
                    Rq::Table => MultipartReply::Table(Vec::new()),
                    Rq::PortStats { .. } => MultipartReply::PortStats(Vec::new()),
                    Rq::TableFeatures(_) => MultipartReply::TableFeatures(Vec::new()),
                    Rq::GroupDesc => MultipartReply::GroupDesc(Vec::new()),
                    Rq::Queue { .. } => MultipartReply::Queue(Vec::new()),
                    Rq::Group { .. } => MultipartReply::Group(Vec::new()),
                    Rq::Meter { .. } => MultipartReply::Meter(Vec::new()),
                    Rq::MeterConfig { .. } => MultipartReply::MeterConfig(Vec::new()),
                    // Requests whose reply is not a list (aggregate,
                    // features): not answered.
                    _ => return,
                };
                Message::MultipartReply { flags: 0, body }
            }
            _ => return,
        };
        sluice_openflow::encode_into(&reply, OFP13, h.xid, scratch);
        out.push(scratch);
    }

    /// Whether flow-mod `m` is a table-miss entry: priority 0, nothing matched.
    fn is_table_miss(&self, m: &[u8], version: u8) -> bool {
        if version == OFP10 {
            u16_at(m, 62) == 0 && u32_at(m, 8) & ((1 << 22) - 1) == (1 << 22) - 1
        } else {
            u16_at(m, 30) == 0 && u16_at(m, 50) == 4
        }
    }

    /// Whether flow-mod `m` sends destination 80:00:00:00:00:<id> to the
    /// learned port.
    fn flow_mod_is_learned(&self, m: &[u8], version: u8, actions10: usize) -> bool {
        let dst = [0x80, 0, 0, 0, 0, self.id as u8];
        if version == OFP10 {
            // ofp_match: dl_dst at 8 + 12; an OUTPUT action's port at +4.
            let dst_ok = m.get(20..26) == Some(&dst[..]) && u32_at(m, 8) & (1 << 3) == 0;
            let out_ok = u16_at(m, actions10) == 0 && u32::from(u16_at(m, actions10 + 4)) == LEARNED_PORT;
            return dst_ok && out_ok;
        }
        // 1.3: find ETH_DST in the match, OUTPUT in the instructions.
        let mlen = usize::from(u16_at(m, 50));
        let mut at = 52;
        let mut dst_ok = false;
        while at + 4 <= 48 + mlen && at + 4 <= m.len() {
            let (field, len) = (m[at + 2] >> 1, usize::from(m[at + 3]));
            if field == 3 && m.get(at + 4..at + 10) == Some(&dst[..]) && m[at + 2] & 1 == 0 {
                dst_ok = true;
            }
            at += 4 + len;
        }
        let ins = 48 + mlen.div_ceil(8) * 8;
        // APPLY_ACTIONS (4) whose first action is OUTPUT (0).
        let out_ok = u16_at(m, ins) == 4 && u16_at(m, ins + 8) == 0 && u32_at(m, ins + 12) == LEARNED_PORT;
        dst_ok && out_ok
    }
}

impl Fake {
    /// One read, then every whole message handled (cbench's read).
    fn read(
        &mut self,
        scratch: &mut Vec<u8>,
        version: u8,
        learn: bool,
        delay: Duration,
        check: &mut Check,
    ) -> Result<(), String> {
        let id = self.state.id;
        match self.inbuf.read_from(&mut self.stream) {
            Ok(0) => return Err(format!("switch {id}: the controller closed the connection")),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => return Ok(()),
            Err(e) => return Err(format!("switch {id}: {e}")),
        }
        loop {
            let m = match self.inbuf.message() {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(()),
                Err(len) => return Err(format!("switch {id}: a message of length {len} from the controller")),
            };
            let len = m.len();
            self.state.handle(m, &mut self.out, scratch, version, learn, delay, check);
            self.inbuf.consumed(len);
        }
    }

    /// Packet-ins as the mode allows, then one write (cbench's write).
    fn write(&mut self, throughput: bool, macs: u32) -> Result<(), String> {
        let s = &mut self.state;
        if let Stage::Waiting(t) = s.stage {
            if Instant::now() > t {
                s.stage = Stage::Ready;
                s.count = 0;
                s.probes = 0;
            }
        } else if s.stage == Stage::Ready {
            if throughput {
                for _ in 0..QUEUE.saturating_sub(self.out.len()) / s.template.len() {
                    s.probe(&mut self.out, macs);
                }
            } else if s.probes == 0 {
                s.probe(&mut self.out, macs);
            }
        }
        if self.out.len() > 0 {
            match self.stream.write(&self.out.data[self.out.start..self.out.end]) {
                Ok(n) => self.out.consumed(n),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => return Err(format!("switch {}: {e}", s.id)),
            }
        }
        Ok(())
    }

    /// The answers counted since the last call; what waits in the socket
    /// is read and dropped, whole messages, as cbench does between tests.
    fn take_count(&mut self) -> Result<u64, String> {
        let count = std::mem::take(&mut self.state.count);
        self.state.probes = 0;
        loop {
            match self.inbuf.read_from(&mut self.stream) {
                Ok(0) => return Err(format!("switch {}: the controller closed the connection", self.state.id)),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(count),
                Err(e) => return Err(format!("switch {}: {e}", self.state.id)),
            }
            while let Ok(Some(m)) = self.inbuf.message() {
                let len = m.len();
                self.inbuf.consumed(len);
            }
        }
    }
}

fn clock() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (s, ms) = (now.as_secs() % 86_400, now.subsec_millis());
    format!("{:02}:{:02}:{:02}.{ms:03}", s / 3600, s / 60 % 60, s % 60)
}

pub fn run(a: &OfbenchArgs) -> Result<(), String> {
    let version = match a.version.as_str() {
        "1.0" => OFP10,
        "1.3" => OFP13,
        v => return Err(format!("-V {v}: OpenFlow 1.0 or 1.3")),
    };
    if a.warmup + a.cooldown >= a.loops {
        return Err(format!("-l {} leaves no test after -w {} and -C {}", a.loops, a.warmup, a.cooldown));
    }
    let addr = (a.controller.as_str(), a.port)
        .to_socket_addrs()
        .map_err(|e| format!("-c {}: {e}", a.controller))?
        .next()
        .ok_or_else(|| format!("-c {}: no address", a.controller))?;
    println!("sluice ofbench: controller benchmarking tool (cbench's workload)");
    println!("   running in mode '{}'", if a.throughput { "throughput" } else { "latency" });
    println!("   connecting to controller at {}:{} ", a.controller, a.port);
    println!("   faking {} switches :: {} tests each; {} ms per test", a.switches, a.loops, a.ms);
    println!("   with {} unique source MACs per switch", a.macs);
    if a.learn == 1 {
        println!("   learning destination mac addresses before the test");
    }
    println!("   starting test with {} ms delay after features_reply", a.delay);
    println!("   ignoring first {} \"warmup\" and last {} \"cooldown\" loops", a.warmup, a.cooldown);
    println!("   OpenFlow {}", a.version);
    // Raise the descriptor limit for many switches.
    crate::raise_descriptor_limit();
    let mut fakes = Vec::with_capacity(a.switches as usize);
    for i in 0..a.switches {
        // Nagle's algorithm stays on, as cbench leaves it (it never turns
        // TCP_NODELAY on): small top-ups coalesce into larger segments.
        let stream = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
        stream.set_nonblocking(true).map_err(|e| e.to_string())?;
        let mut f = Fake {
            stream,
            inbuf: Buf::new(),
            out: Buf::new(),
            state: State {
                id: i + 1,
                stage: Stage::Handshake,
                xid: 1,
                buffer_id: 1,
                mac: 0,
                probes: 0,
                count: 0,
                template: {
                    let mut t = Vec::new();
                    packet_in(&mut t, version, 0, 0, 1, &frame(i + 1, 0));
                    t
                },
            },
        };
        // HELLO with a version bitmap of the one version.
        let mut hello = Vec::new();
        header(&mut hello, version, 0, 16, 1);
        hello.extend_from_slice(&[0, 1, 0, 8]);
        hello.extend_from_slice(&(1u32 << version).to_be_bytes());
        f.out.push(&hello);
        fakes.push(f);
    }
    let mut check = Check::default();
    let mut results = Vec::new();
    let delay = Duration::from_millis(a.delay);
    let total_wait = Duration::from_millis(a.ms + a.delay);
    let learn = a.learn == 1;
    let mut scratch = Vec::with_capacity(256);
    let mut pollfds: Vec<libc::pollfd> = fakes
        .iter()
        .map(|f| libc::pollfd { fd: f.stream.as_raw_fd(), events: libc::POLLIN | libc::POLLOUT, revents: 0 })
        .collect();
    for test in 0..a.loops {
        let start = Instant::now();
        let passed = loop {
            let elapsed = start.elapsed();
            if elapsed > total_wait {
                break elapsed;
            }
            // SAFETY: `pollfds` is a live array of `pollfds.len()` entries.
            let n = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, 1000) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll: {e}"));
            }
            for (f, p) in fakes.iter_mut().zip(&pollfds) {
                if p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                    f.read(&mut scratch, version, learn, delay, &mut check)?;
                }
                if p.revents & libc::POLLOUT != 0 {
                    f.write(a.throughput, a.macs)?;
                }
            }
        };
        // cbench waits 100 ms, then takes each switch's count and reads
        // away what the controller sent meanwhile, uncounted.
        std::thread::sleep(Duration::from_millis(100));
        let counts: Vec<u64> = fakes.iter_mut().map(Fake::take_count).collect::<Result<_, _>>()?;
        let ms = passed.saturating_sub(delay).as_secs_f64() * 1000.0;
        let total: u64 = counts.iter().sum();
        let per_ms = total as f64 / ms;
        let list: Vec<String> = counts.iter().map(u64::to_string).collect();
        println!(
            "{} {:<3} switches: flows/sec:  {}   total = {per_ms:.6} per ms ",
            clock(),
            a.switches,
            list.join("  ")
        );
        if test >= a.warmup && test < a.loops - a.cooldown {
            results.push(per_ms * 1000.0);
        }
    }
    let n = results.len() as f64;
    let min = results.iter().copied().fold(f64::INFINITY, f64::min);
    let max = results.iter().copied().fold(0.0, f64::max);
    let avg = results.iter().sum::<f64>() / n;
    let stdev = (results.iter().map(|r| (r - avg) * (r - avg)).sum::<f64>() / n).sqrt();
    println!(
        "RESULT: {} switches {} tests min/max/avg/stdev = {min:.2}/{max:.2}/{avg:.2}/{stdev:.2} responses/s",
        a.switches,
        results.len()
    );
    let silent = fakes.iter().filter(|f| f.state.stage != Stage::Ready).count();
    println!(
        "CHECK: {} flow-mods ({} table-miss, {} others not sending the learned destination to port {LEARNED_PORT}), {} packet-outs, {} errors, {silent} switches never ready",
        check.flow_mods, check.table_miss, check.wrong, check.packet_outs, check.errors
    );
    Ok(())
}
