//! `sluice lwaftr run`: the lwAFTR on live interfaces, and the commands
//! that talk to a running instance (`query`, `config add|remove`).
//!
//! The running instance serves a Unix socket,
//! `/run/sluice/lwaftr/<pid>.sock` (and `<name>.sock` with `--name`). A
//! client connects, writes one request and shuts its side down; the
//! instance answers and closes. Requests: `counters` (the non-zero
//! counters, `name: value` lines, sorted), `add` followed by softwire
//! blocks, `remove` followed by softwire blocks or
//! `/softwire-config/binding-table/softwire[ipv4=A][psid=P]` paths. A
//! failed request is answered with a line starting with `error:`.
//! Changes reach every worker between two batches (`Pool::try_change`
//! then `Pool::flush`): the other softwires keep forwarding.

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_dataplane::workers::Pool;
use sluice_live::{Backend, LiveConfig, PortSpec};
use sluice_lwaftr::conf::{Config, Softwire};
use sluice_lwaftr::counters::Counters;
use sluice_lwaftr::{Lwaftr, Options};

/// Where running instances serve their control sockets.
pub const RUN_DIR: &str = "/run/sluice/lwaftr";

/// What `run` is started with.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    pub conf: PathBuf,
    /// `[af_packet:|af_xdp:]IFACE` of the external (IPv4) side.
    pub v4: Option<String>,
    /// `[af_packet:|af_xdp:]IFACE` of the internal (IPv6) side.
    pub v6: Option<String>,
    /// One interface carrying both sides.
    pub on_a_stick: Option<String>,
    pub workers: usize,
    /// Instance (`device`) of the configuration; the first when `None`.
    pub device: Option<String>,
    /// Queue of the instance; the first when `None`.
    pub queue: Option<u8>,
    /// Also serve the control socket as `<name>.sock`.
    pub name: Option<String>,
    /// Stop after this many seconds (else at SIGINT or SIGTERM).
    pub duration: Option<f64>,
    /// Print one CSV line per second: decapsulated and encapsulated Mpps and Gbps.
    pub verbose: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// `PORT@[backend:]IFACE` for the live loop.
fn port_spec(port: u32, iface: &str) -> Result<PortSpec, String> {
    let spec = PortSpec::parse(&format!("{port}@{iface}"))?;
    if spec.backend == Backend::Tap {
        return Err(format!("{iface}: the lwAFTR runs on af_packet: or af_xdp: interfaces"));
    }
    Ok(spec)
}

/// The non-zero counters, `name: value` lines in name order (Snabb's
/// block, then Sluice's own), keeping names that contain `filter`.
pub fn format_counters(c: &Counters, filter: Option<&str>) -> String {
    format_counters_with(c, filter, false)
}

/// [`format_counters`]; `zeros`: every counter, zero or not.
fn format_counters_with(c: &Counters, filter: Option<&str>, zeros: bool) -> String {
    let mut all: Vec<(&str, u64)> = c.snabb.iter().chain(c.extra.iter()).filter(|&(_, v)| zeros || v != 0).collect();
    all.sort();
    let mut s = String::new();
    for (n, v) in all {
        if filter.is_none_or(|f| n.contains(f)) {
            s.push_str(&format!("{n}: {v}\n"));
        }
    }
    s
}

/// Runs the lwAFTR until SIGINT or SIGTERM, then prints the non-zero
/// counters and the ports' statistics.
pub fn run(a: &RunArgs) -> Result<(), String> {
    let text = std::fs::read_to_string(&a.conf).map_err(|e| format!("cannot read {}: {e}", a.conf.display()))?;
    let conf = Config::parse(&text, &a.conf.display().to_string()).map_err(|e| e.to_string())?;
    let (ports, on_a_stick) = match (&a.v4, &a.v6, &a.on_a_stick) {
        (Some(v4), Some(v6), None) => (vec![port_spec(0, v4)?, port_spec(1, v6)?], false),
        (None, None, Some(i)) => (vec![port_spec(0, i)?], true),
        _ => return Err("give --v4 IFACE and --v6 IFACE, or --on-a-stick IFACE".into()),
    };
    let opts = Options { on_a_stick, ..Options::default() };
    let mut plane = Lwaftr::for_queue(&conf, a.device.as_deref(), a.queue, opts)?;
    let n = plane.binding_table_mut().len();
    let s = plane.settings();
    eprintln!(
        "lwaftr: {n} softwires; external {} ({}), internal {} ({})",
        s.external.queue.ip,
        ports[0].iface,
        s.internal.queue.ip,
        ports.get(1).map_or("on a stick", |p| p.iface.as_str()),
    );
    let cfg = LiveConfig { ports, offload: false, workers: a.workers.max(1), ..LiveConfig::default() };
    std::fs::create_dir_all(RUN_DIR).map_err(|e| format!("cannot create {RUN_DIR}: {e}"))?;
    let mut socks = vec![Path::new(RUN_DIR).join(format!("{}.sock", std::process::id()))];
    if let Some(n) = &a.name {
        if n.is_empty() || n.contains('/') {
            return Err(format!("--name {n:?}: a name is a non-empty word without '/'"));
        }
        socks.push(Path::new(RUN_DIR).join(format!("{n}.sock")));
    }
    let mut listeners = Vec::new();
    for p in &socks {
        if p.exists() {
            if UnixStream::connect(p).is_ok() {
                return Err(format!("{}: another instance serves this name", p.display()));
            }
            let _ = std::fs::remove_file(p);
        }
        let l = UnixListener::bind(p).map_err(|e| format!("cannot serve {}: {e}", p.display()))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        listeners.push(l);
    }
    let _cleanup = Cleanup(socks.clone());
    STOP.store(false, Ordering::Relaxed);
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (mut pool, live) = sluice_live::start(plane, &cfg, None, stop.clone())?;
    eprintln!("lwaftr: running with {} worker(s); control socket {}", cfg.workers, socks[0].display());
    let started = std::time::Instant::now();
    let mut next_line = 1.0;
    let mut last = Counters::default();
    if a.verbose {
        println!("Time (s),Decap. MPPS,Decap. Gbps,Encap. MPPS,Encap. Gbps");
    }
    while !STOP.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        let t = started.elapsed().as_secs_f64();
        if a.duration.is_some_and(|d| t >= d) {
            break;
        }
        if a.verbose && t >= next_line {
            let c = pool.read(|d| *d.lw_counters());
            let (n, o) = (&c.snabb, &last.snabb);
            println!(
                "{next_line:.0},{:.6},{:.6},{:.6},{:.6}",
                (n.out_ipv4_packets - o.out_ipv4_packets) as f64 / 1e6,
                (n.out_ipv4_bytes - o.out_ipv4_bytes) as f64 * 8.0 / 1e9,
                (n.out_ipv6_packets - o.out_ipv6_packets) as f64 / 1e6,
                (n.out_ipv6_bytes - o.out_ipv6_bytes) as f64 * 8.0 / 1e9,
            );
            last = c;
            next_line += 1.0;
        }
        let mut served = false;
        for l in &listeners {
            if let Ok((conn, _)) = l.accept() {
                served = true;
                serve(&mut pool, conn);
            }
        }
        if !served {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    stop.store(true, Ordering::Relaxed);
    pool.stop_workers();
    drop(listeners);
    println!("{}", format_counters(pool.master().lw_counters(), None).trim_end());
    eprint!("{}", live.summary());
    match live.error() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Removes the control sockets when `run` returns.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Answers one request of a client.
fn serve(pool: &mut Pool<Lwaftr>, mut conn: UnixStream) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    let mut req = String::new();
    let answer = match conn.read_to_string(&mut req) {
        Err(e) => format!("error: cannot read the request: {e}\n"),
        Ok(_) => match answer(pool, &req) {
            Ok(s) => s,
            Err(e) => format!("error: {e}\n"),
        },
    };
    let _ = conn.write_all(answer.as_bytes());
}

/// The answer to request `req` (see the module's documentation).
fn answer(pool: &mut Pool<Lwaftr>, req: &str) -> Result<String, String> {
    let (verb, rest) = req.split_once(char::is_whitespace).unwrap_or((req, ""));
    match verb.trim() {
        "counters" => Ok(pool.read(|d| format_counters(d.lw_counters(), None))),
        "counters-all" => Ok(pool.read(|d| format_counters_with(d.lw_counters(), None, true))),
        "add" => {
            let sws = Config::parse_softwires(rest, "request").map_err(|e| e.to_string())?;
            let n = sws.len();
            let sws: Arc<[Softwire]> = sws.into();
            let all = sws.clone();
            // Checked on a copy first, so that a bad softwire changes nothing.
            let mut probe = pool.master_mut().binding_table_mut().clone();
            for s in all.iter() {
                probe.add(s)?;
            }
            pool.try_change(move |d: &mut Lwaftr, _| -> Result<(), String> {
                for s in sws.iter() {
                    d.binding_table_mut().add(s)?;
                }
                Ok(())
            })?;
            pool.flush();
            Ok(format!("added {n} softwire(s); {} now\n", pool.master_mut().binding_table_mut().len()))
        }
        "remove" => {
            let keys = removal_keys(rest)?;
            let missing: Vec<String> = keys
                .iter()
                .filter(|(ip, psid)| pool.master_mut().binding_table_mut().get(*ip, *psid).is_none())
                .map(|(ip, psid)| format!("{ip} psid {psid}"))
                .collect();
            if !missing.is_empty() {
                return Err(format!("no such softwire: {}", missing.join(", ")));
            }
            let n = keys.len();
            pool.change(move |d: &mut Lwaftr, _| {
                for (ip, psid) in &keys {
                    d.binding_table_mut().remove(*ip, *psid);
                }
            });
            pool.flush();
            Ok(format!("removed {n} softwire(s); {} now\n", pool.master_mut().binding_table_mut().len()))
        }
        v => Err(format!("unknown request {v:?} (counters, counters-all, add, remove)")),
    }
}

/// The (ipv4, psid) keys of a removal: softwire blocks, or
/// `/softwire-config/binding-table/softwire[ipv4=A][psid=P]` paths (one a line).
fn removal_keys(text: &str) -> Result<Vec<(Ipv4Addr, u16)>, String> {
    if text.trim_start().starts_with('/') {
        return text.split_whitespace().map(parse_path).collect();
    }
    let sws = Config::parse_softwires(text, "request").map_err(|e| e.to_string())?;
    if sws.is_empty() {
        return Err("no softwire given".into());
    }
    Ok(sws.iter().map(|s| (s.ipv4, s.psid)).collect())
}

/// `/softwire-config/binding-table/softwire[ipv4=A][psid=P]`.
fn parse_path(p: &str) -> Result<(Ipv4Addr, u16), String> {
    let bad = || format!("{p:?} is not /softwire-config/binding-table/softwire[ipv4=A][psid=P]");
    let rest = p.strip_prefix("/softwire-config/binding-table/softwire").ok_or_else(bad)?;
    let (mut ip, mut psid) = (None, None);
    for part in rest.split(']').filter(|s| !s.is_empty()) {
        let (k, v) = part.strip_prefix('[').and_then(|s| s.split_once('=')).ok_or_else(bad)?;
        match k {
            "ipv4" => ip = Some(v.parse::<Ipv4Addr>().map_err(|_| bad())?),
            "psid" => psid = Some(v.parse::<u16>().map_err(|_| bad())?),
            _ => return Err(bad()),
        }
    }
    Ok((ip.ok_or_else(bad)?, psid.unwrap_or(0)))
}

/// The control socket of instance `who` (a PID or a `--name`), or of the
/// only running instance when `None`.
fn socket_of(who: Option<&str>) -> Result<PathBuf, String> {
    if let Some(w) = who {
        let p = Path::new(RUN_DIR).join(format!("{w}.sock"));
        if !p.exists() {
            return Err(format!("no lwAFTR instance {w:?} ({} does not exist)", p.display()));
        }
        return Ok(p);
    }
    let mut live = Vec::new();
    if let Ok(dir) = std::fs::read_dir(RUN_DIR) {
        for e in dir.flatten() {
            let p = e.path();
            let is_pid = p.file_stem().and_then(|s| s.to_str()).is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()));
            if is_pid && p.extension().is_some_and(|x| x == "sock") && UnixStream::connect(&p).is_ok() {
                live.push(p);
            }
        }
    }
    match live.len() {
        0 => Err("no lwAFTR instance is running".into()),
        1 => Ok(live.remove(0)),
        n => Err(format!("{n} lwAFTR instances are running: name one (PID or --name)")),
    }
}

/// Sends `req` to instance `who` and returns its answer.
pub fn request(who: Option<&str>, req: &str) -> Result<String, String> {
    let p = socket_of(who)?;
    let mut c = UnixStream::connect(&p).map_err(|e| format!("cannot connect to {}: {e}", p.display()))?;
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    c.write_all(req.as_bytes()).map_err(|e| format!("{}: {e}", p.display()))?;
    c.shutdown(std::net::Shutdown::Write).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut out = String::new();
    c.read_to_string(&mut out).map_err(|e| format!("{}: {e}", p.display()))?;
    if let Some(e) = out.strip_prefix("error: ") {
        return Err(e.trim_end().to_string());
    }
    Ok(out)
}

/// `sluice lwaftr query [PID|NAME] [SUBSTRING]`: the running instance's
/// non-zero counters (every counter with `all`) whose names contain SUBSTRING.
pub fn query(who: Option<&str>, filter: Option<&str>, all: bool) -> Result<(), String> {
    let out = request(who, if all { "counters-all" } else { "counters" })?;
    for l in out.lines() {
        if filter.is_none_or(|f| l.split(':').next().is_some_and(|n| n.contains(f))) {
            println!("{l}");
        }
    }
    Ok(())
}

/// `sluice lwaftr config add|remove PID|NAME TEXT` (`-` or nothing: standard input).
pub fn config(verb: &str, who: &str, text: Option<&str>) -> Result<(), String> {
    let text = match text {
        Some(t) if t != "-" => t.to_string(),
        _ => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| format!("standard input: {e}"))?;
            s
        }
    };
    print!("{}", request(Some(who), &format!("{verb}\n{text}"))?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_paths_and_blocks() {
        assert_eq!(
            removal_keys("/softwire-config/binding-table/softwire[ipv4=1.2.3.4][psid=7]").unwrap(),
            vec![(Ipv4Addr::new(1, 2, 3, 4), 7)]
        );
        assert!(removal_keys("/softwire-config/binding-table/softwire[ipv4=x]").is_err());
        let keys = removal_keys(
            "softwire { ipv4 10.0.0.1; psid 3; b4-ipv6 fc00::2; br-address fc00::1; port-set { psid-length 6; } }",
        )
        .unwrap();
        assert_eq!(keys, vec![(Ipv4Addr::new(10, 0, 0, 1), 3)]);
    }

    #[test]
    fn counters_print_non_zero_sorted() {
        let mut c = Counters::default();
        c.snabb.out_ipv4_packets = 2;
        c.snabb.in_ipv4_packets = 5;
        c.extra.malformed = 1;
        assert_eq!(format_counters(&c, None), "in-ipv4-packets: 5\nout-ipv4-packets: 2\nsluice-malformed-frames: 1\n");
        assert_eq!(format_counters(&c, Some("out")), "out-ipv4-packets: 2\n");
    }
}
