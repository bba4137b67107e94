//! `sluice openflow-flow-rate --switch tcp:IP:PORT [--flows N] [--batch B]`:
//! how fast an OpenFlow 1.3 switch takes flow-mods from a controller.
//!
//! Connects to the switch's passive listener as a controller, negotiates
//! OpenFlow 1.3, then sends N flow-mods (ADD, one /32 IPv4 destination
//! each, output to a port) in batches of B, each batch followed by a
//! BARRIER_REQUEST whose reply it waits for before the next batch (so
//! every counted flow is in the switch's tables, workers included). Then
//! the same for deleting them (strict deletes). Prints flows per second
//! for both, and the errors the switch sent, if any. Works against any
//! OpenFlow 1.3 switch (`sluice openflow`, Open vSwitch's `ptcp:`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use sluice_openflow::{
    decode, encode_into, flow_mod_command, peek_header, Action, FlowMod, HelloElement, Instruction, Match, Message,
    Oxm, OxmField, OFP13,
};

/// The arguments of `sluice openflow-flow-rate`.
#[derive(Debug, Clone, clap::Args)]
pub struct FlowRateArgs {
    /// The switch's listener, `tcp:IP:PORT`.
    #[arg(long)]
    pub switch: String,
    /// Flows to add (then delete).
    #[arg(long, default_value_t = 100_000)]
    pub flows: u32,
    /// Flow-mods per barrier.
    #[arg(long, default_value_t = 1000)]
    pub batch: u32,
    /// Table the flows go into.
    #[arg(long, default_value_t = 0)]
    pub table: u8,
    /// Output port of the flows.
    #[arg(long, default_value_t = 2)]
    pub port: u32,
}

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    errors: u64,
    first_error: Option<String>,
}

impl Conn {
    /// Reads messages until one satisfies `done`; errors are counted.
    fn until(&mut self, mut done: impl FnMut(&Message, u32) -> bool) -> Result<(), String> {
        let mut chunk = [0u8; 65536];
        loop {
            while let Some(h) = peek_header(&self.buf) {
                let len = usize::from(h.length);
                if len < 8 {
                    return Err("the switch sent a message shorter than its header".into());
                }
                if self.buf.len() < len {
                    break;
                }
                let msg: Vec<u8> = self.buf.drain(..len).collect();
                match decode(&msg) {
                    Ok((h, Message::Error(e))) => {
                        self.errors += 1;
                        if self.first_error.is_none() {
                            self.first_error = Some(format!("xid {}: type {} code {}", h.xid, e.typ, e.code));
                        }
                    }
                    Ok((h, Message::EchoRequest(d))) => {
                        let mut out = Vec::new();
                        encode_into(&Message::EchoReply(d), OFP13, h.xid, &mut out);
                        self.s.write_all(&out).map_err(|e| e.to_string())?;
                    }
                    Ok((h, m)) => {
                        if done(&m, h.xid) {
                            return Ok(());
                        }
                    }
                    Err(e) => return Err(format!("the switch sent an undecodable message: {e}")),
                }
            }
            let n = self.s.read(&mut chunk).map_err(|e| format!("reading from the switch: {e}"))?;
            if n == 0 {
                return Err("the switch closed the connection".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn flow_mod(i: u32, command: u8, table: u8, port: u32) -> Message {
    let dst = 0x0a00_0000u32 | (i & 0x00ff_ffff);
    Message::FlowMod(FlowMod {
        cookie: u64::from(i),
        cookie_mask: 0,
        table_id: table,
        command,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 100,
        buffer_id: sluice_openflow::NO_BUFFER,
        out_port: sluice_openflow::port::ANY,
        out_group: sluice_openflow::group::ANY,
        flags: 0,
        matched: Match {
            fields: vec![
                Oxm { field: OxmField::EthType, value: vec![0x08, 0x00], mask: None },
                Oxm { field: OxmField::Ipv4Dst, value: dst.to_be_bytes().to_vec(), mask: None },
            ],
        },
        instructions: vec![Instruction::ApplyActions(vec![Action::Output { port, max_len: 0 }])],
    })
}

/// Sends flow-mods `0..n` with `command` in batches, a barrier after each;
/// returns the seconds it took.
fn run_phase(c: &mut Conn, a: &FlowRateArgs, command: u8, xid: &mut u32) -> Result<f64, String> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut i = 0;
    while i < a.flows {
        out.clear();
        let end = (i + a.batch.max(1)).min(a.flows);
        for k in i..end {
            *xid += 1;
            encode_into(&flow_mod(k, command, a.table, a.port), OFP13, *xid, &mut out);
        }
        *xid += 1;
        let barrier = *xid;
        encode_into(&Message::BarrierRequest, OFP13, barrier, &mut out);
        c.s.write_all(&out).map_err(|e| format!("writing to the switch: {e}"))?;
        c.until(|m, x| matches!(m, Message::BarrierReply) && x == barrier)?;
        i = end;
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Runs the measurement (see the module documentation).
pub fn run(a: &FlowRateArgs) -> Result<(), String> {
    let addr = a.switch.strip_prefix("tcp:").ok_or_else(|| format!("--switch {}: expected tcp:IP:PORT", a.switch))?;
    let s = TcpStream::connect(addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    s.set_nodelay(true).ok();
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let mut c = Conn { s, buf: Vec::new(), errors: 0, first_error: None };
    let mut out = Vec::new();
    encode_into(&Message::Hello(vec![HelloElement::VersionBitmap(vec![1 << OFP13])]), OFP13, 1, &mut out);
    encode_into(&Message::FeaturesRequest, OFP13, 2, &mut out);
    c.s.write_all(&out).map_err(|e| e.to_string())?;
    let mut dpid = 0;
    c.until(|m, _| match m {
        Message::FeaturesReply(f) => {
            dpid = f.datapath_id;
            true
        }
        _ => false,
    })?;
    println!("switch {addr}: datapath {dpid:016x}; {} flows in batches of {} (a barrier after each)", a.flows, a.batch);
    let mut xid = 10;
    let add = run_phase(&mut c, a, flow_mod_command::ADD, &mut xid)?;
    println!("add:    {:>10.0} flows/s ({} flows in {add:.3} s)", f64::from(a.flows) / add, a.flows);
    let del = run_phase(&mut c, a, flow_mod_command::DELETE_STRICT, &mut xid)?;
    println!("delete: {:>10.0} flows/s ({} flows in {del:.3} s)", f64::from(a.flows) / del, a.flows);
    if c.errors > 0 {
        println!("errors: {} (first: {})", c.errors, c.first_error.as_deref().unwrap_or("-"));
    }
    println!(
        "result: flows={} batch={} add_per_s={:.0} delete_per_s={:.0} errors={}",
        a.flows,
        a.batch,
        f64::from(a.flows) / add,
        f64::from(a.flows) / del,
        c.errors
    );
    Ok(())
}
