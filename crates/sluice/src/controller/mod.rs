//! The OpenFlow controller's commands: `sluice controller` (this file) and
//! `sluice ofbench` (`ofbench.rs`, cbench's benchmark).
//!
//! `sluice controller [--listen tcp:IP:PORT|ssl:IP:PORT] [--threads N] [--app l2|hub|fast-reply|router[,...]]
//! [--of 1.0,1.3] [--role master|slave|equal --generation-id N] [--duration S]`: an OpenFlow controller running the
//! shipped applications (`sluice-ofcontroller`), logging switches as they
//! come and go and, every second with traffic, the messages in and out;
//! until SIGINT or SIGTERM, then a last summary.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod ofbench;

use sluice_ofcontroller::{app_by_name, App, Chain, Config, Controller, Counters, MakeApp, APPS};

/// The arguments of `sluice controller`.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Where switches connect: `tcp:IP:PORT` (or `tcp:PORT`, all addresses), or `ssl:IP:PORT` for TLS (with --private-key and --certificate).
    #[arg(long, default_value = "tcp:0.0.0.0:6653")]
    pub listen: String,
    /// TLS: the controller's private key (PEM).
    #[arg(long)]
    pub private_key: Option<std::path::PathBuf>,
    /// TLS: the controller's certificate chain (PEM).
    #[arg(long)]
    pub certificate: Option<std::path::PathBuf>,
    /// TLS: switches must present a certificate from this authority (PEM); without, none is asked.
    #[arg(long)]
    pub ca_cert: Option<std::path::PathBuf>,
    /// Worker threads (switch connections are spread over them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: u32,
    /// Applications, comma-separated, each called in turn for every event: l2, hub, fast-reply, router.
    #[arg(long, default_value = "l2")]
    pub app: String,
    /// OpenFlow versions spoken, comma-separated: 1.0 and/or 1.3.
    #[arg(long = "of", default_value = "1.0,1.3")]
    pub versions: String,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Seconds of silence before an echo request; three close the connection.
    #[arg(long, default_value_t = 5.0)]
    pub echo_interval: f64,
    /// OpenFlow 1.3 role to ask of every switch: master, slave or equal (with --generation-id).
    #[arg(long)]
    pub role: Option<String>,
    /// The generation id sent with --role master or slave.
    #[arg(long, default_value_t = 0)]
    pub generation_id: u64,
    /// Switch connections open at once; one more is closed as soon as it is accepted (counted and logged).
    #[arg(long, default_value_t = 16_384, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
}

/// `tcp:IP:PORT`, `tcp:PORT`, `ssl:IP:PORT` or `ssl:PORT`: the address
/// and whether it is TLS.
fn parse_listen(s: &str) -> Result<(SocketAddr, bool), String> {
    let (rest, tls) = match (s.strip_prefix("tcp:"), s.strip_prefix("ssl:")) {
        (Some(r), _) => (r, false),
        (_, Some(r)) => (r, true),
        _ => return Err(format!("--listen {s}: expected tcp:IP:PORT or ssl:IP:PORT")),
    };
    if let Ok(port) = rest.parse::<u16>() {
        return Ok((SocketAddr::from(([0, 0, 0, 0], port)), tls));
    }
    let addr =
        rest.parse().map_err(|_| format!("--listen {s}: expected tcp:IP:PORT, tcp:PORT, ssl:IP:PORT or ssl:PORT"))?;
    Ok((addr, tls))
}

fn parse_versions(s: &str) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim) {
        v.push(match part {
            "1.0" => 1,
            "1.3" => 4,
            other => return Err(format!("--of: unknown OpenFlow version {other:?} (1.0 or 1.3)")),
        });
    }
    Ok(v)
}

/// The applications `--app` names, as one maker.
fn apps(s: &str) -> Result<Vec<MakeApp>, String> {
    s.split(',')
        .map(str::trim)
        .map(|n| app_by_name(n).ok_or_else(|| format!("--app: no application {n:?} (there are: {})", APPS.join(", "))))
        .collect()
}

fn snapshot(c: &Counters) -> [u64; 4] {
    let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    [r(&c.messages_in), r(&c.messages_out), r(&c.packet_ins), r(&c.switches_up) - r(&c.switches_down)]
}

pub fn run(a: &ControllerArgs) -> Result<(), String> {
    let (listen, tls) = parse_listen(&a.listen)?;
    let tls = match (tls, &a.private_key, &a.certificate) {
        (false, None, None) if a.ca_cert.is_none() => None,
        (false, _, _) => return Err("--private-key, --certificate and --ca-cert go with --listen ssl:...".into()),
        (true, Some(key), Some(cert)) => Some(sluice_ofcontroller::tls_config(cert, key, a.ca_cert.as_deref())?),
        (true, _, _) => return Err("--listen ssl:... needs --private-key and --certificate".into()),
    };
    let versions = parse_versions(&a.versions)?;
    let makers = apps(&a.app)?;
    if a.echo_interval.is_nan() || a.echo_interval <= 0.0 {
        return Err("--echo-interval must be above 0".into());
    }
    let role = match a.role.as_deref() {
        None => None,
        Some("master") => Some((sluice_openflow::controller_role::MASTER, a.generation_id)),
        Some("slave") => Some((sluice_openflow::controller_role::SLAVE, a.generation_id)),
        Some("equal") => Some((sluice_openflow::controller_role::EQUAL, a.generation_id)),
        Some(r) => return Err(format!("--role {r}: master, slave or equal")),
    };
    let cfg = Config {
        role,
        tls,
        listen,
        threads: a.threads as usize,
        versions,
        echo_interval: Duration::from_secs_f64(a.echo_interval),
        log: Some(Arc::new(|m: &str| eprintln!("controller: {m}"))),
        max_connections: a.max_connections as usize,
        ..Config::default()
    };
    let make = move || -> Box<dyn App> {
        if makers.len() == 1 {
            makers[0]()
        } else {
            Box::new(Chain(makers.iter().map(|m| m()).collect()))
        }
    };
    // Every switch is a descriptor: take the whole limit the system allows.
    crate::raise_descriptor_limit();
    let stop = sluice_node::Stop::new();
    sluice_node::signals::stop_on_signals(&stop);
    let ctl = Controller::start(cfg, make).map_err(|e| format!("--listen {}: {e}", a.listen))?;
    eprintln!(
        "controller: listening on {}:{} (OpenFlow {}, app {}, {} thread(s))",
        if a.listen.starts_with("ssl:") { "ssl" } else { "tcp" },
        ctl.local_addr,
        a.versions,
        a.app,
        a.threads
    );
    let end = a.duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut last = snapshot(&ctl.counters);
    let mut tick = Instant::now();
    // A line a second with traffic, until the end.
    loop {
        let next = tick + Duration::from_secs(1);
        if stop.wait(Some(end.map_or(next, |e| e.min(next)))) || end.is_some_and(|e| Instant::now() >= e) {
            break;
        }
        let now = snapshot(&ctl.counters);
        let secs = tick.elapsed().as_secs_f64();
        tick = Instant::now();
        if now[..3] != last[..3] {
            eprintln!(
                "controller: {} switch(es), {:.0} messages/s in, {:.0} out, {:.0} packet-ins/s",
                now[3],
                (now[0] - last[0]) as f64 / secs,
                (now[1] - last[1]) as f64 / secs,
                (now[2] - last[2]) as f64 / secs
            );
        }
        last = now;
    }
    let c = Arc::clone(&ctl.counters);
    ctl.stop();
    let r = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    eprintln!(
        "controller: stopped: {} connections ({} refused past --max-connections), {} switches up, {} messages in, {} out, {} packet-ins, {} malformed, \
         {} closed for protocol errors or silence, {} messages dropped to slow switches, {} requests a switch's version cannot say",
        r(&c.accepted),
        r(&c.refused),
        r(&c.switches_up),
        r(&c.messages_in),
        r(&c.messages_out),
        r(&c.packet_ins),
        r(&c.malformed),
        r(&c.closed_bad),
        r(&c.dropped_out),
        r(&c.untranslatable)
    );
    Ok(())
}
