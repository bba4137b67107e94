//! `sluice top [NAME|PID]`: any running Sluice instance, live in the
//! terminal, as `snabb top` shows Snabb's: rates per port, per worker and
//! per stage, drops by reason, updates per second, and the data plane's
//! busiest counters.
//!
//! Contract: reads the instance's metrics from its control socket
//! (`sluice_node::socket`, request `metrics`), the very text `--metrics`
//! serves to Prometheus, once per interval; every figure on the screen is
//! a difference of two of those readings divided by the time between
//! them, so a rate never disagrees with what Prometheus computes from the
//! same counters. Draws with ANSI escapes (clear, home) on a terminal, and
//! plain frames one after another otherwise. Ends at SIGINT or SIGTERM,
//! after `--count` screens, or when the instance is gone.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use sluice_dataplane::telemetry::{Kind, Metrics};

/// The arguments of `sluice top`.
#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    /// The instance: its PID or its name; the only running one when omitted.
    pub instance: Option<String>,
    /// Seconds between two screens.
    #[arg(short = 'd', long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many screens.
    #[arg(short = 'n', long)]
    pub count: Option<u64>,
    /// List the running instances and stop.
    #[arg(short, long)]
    pub list: bool,
}

/// One reading of the metrics, and when it was taken.
struct Reading {
    at: Instant,
    m: Metrics,
}

/// Every sample of family `name`, by its labels' values joined with `/`.
fn by_labels(m: &Metrics, name: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for f in m.families().iter().filter(|f| f.name == name) {
        for s in &f.samples {
            let key = s.labels.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>().join("/");
            out.insert(key, s.value);
        }
    }
    out
}

/// Per-second rates of every sample of counter `name` between two readings.
fn rates(old: &Reading, new: &Reading, name: &str) -> BTreeMap<String, f64> {
    let secs = new.at.duration_since(old.at).as_secs_f64().max(1e-3);
    let before = by_labels(&old.m, name);
    by_labels(&new.m, name)
        .into_iter()
        .map(|(k, v)| {
            let was = before.get(&k).copied().unwrap_or(0.0);
            // A counter that went down started again (a data plane rebuilt): count from zero.
            let d = if v >= was { v - was } else { v };
            (k, d / secs)
        })
        .collect()
}

/// `n` with a k/M/G suffix.
fn si(n: f64) -> String {
    match n {
        n if n >= 1e9 => format!("{:.2}G", n / 1e9),
        n if n >= 1e6 => format!("{:.2}M", n / 1e6),
        n if n >= 1e3 => format!("{:.1}k", n / 1e3),
        n => format!("{n:.0}"),
    }
}

/// The screen for two readings of one instance.
fn screen(who: &str, old: &Reading, new: &Reading) -> String {
    let m = &new.m;
    let mut s = String::new();
    let info = m.families().iter().find(|f| f.name == "sluice_info").and_then(|f| f.samples.first());
    let label =
        |k: &str| info.and_then(|i| i.labels.iter().find(|(n, _)| n == k)).map_or(String::new(), |(_, v)| v.clone());
    let started = m.get("sluice_start_time_seconds", &[]).unwrap_or(0.0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let up = (now - started).max(0.0) as u64;
    let _ = writeln!(
        s,
        "sluice top: {who} ({} data plane{}), up {:02}:{:02}:{:02}, {} worker(s)",
        label("data_plane"),
        match label("name") {
            n if n.is_empty() => String::new(),
            n => format!(" \"{n}\""),
        },
        up / 3600,
        up / 60 % 60,
        up % 60,
        m.get("sluice_workers", &[]).unwrap_or(0.0)
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<6}{:<16}{:>12}{:>12}{:>12}{:>12}{:>10}{:>6}",
        "port", "interface", "rx pps", "rx Mbit/s", "tx pps", "tx Mbit/s", "drops/s", "link"
    );
    let rx = rates(old, new, "sluice_port_received_packets_total");
    let rxb = rates(old, new, "sluice_port_received_bytes_total");
    let tx = rates(old, new, "sluice_port_sent_packets_total");
    let txb = rates(old, new, "sluice_port_sent_bytes_total");
    let mut drops: BTreeMap<String, f64> = BTreeMap::new();
    for (k, v) in rates(old, new, "sluice_port_dropped_packets_total") {
        // port/interface/reason: summed per port.
        let port = k.rsplit_once('/').map_or("", |x| x.0).to_string();
        *drops.entry(port).or_default() += v;
    }
    let links = by_labels(m, "sluice_port_up");
    let mut ports: Vec<&String> = rx.keys().collect();
    ports.sort_by_key(|k| k.split('/').next().and_then(|p| p.parse::<u32>().ok()).unwrap_or(u32::MAX));
    for k in ports {
        let (port, iface) = k.split_once('/').unwrap_or((k, ""));
        let g = |r: &BTreeMap<String, f64>| r.get(k).copied().unwrap_or(0.0);
        let _ = writeln!(
            s,
            "{port:<6}{iface:<16}{:>12}{:>12.2}{:>12}{:>12.2}{:>10}{:>6}",
            si(g(&rx)),
            g(&rxb) * 8.0 / 1e6,
            si(g(&tx)),
            g(&txb) * 8.0 / 1e6,
            si(g(&drops)),
            match links.get(k) {
                Some(v) if *v > 0.0 => "up",
                Some(_) => "down",
                None => "-",
            }
        );
    }
    let _ = writeln!(s);
    let wrx = rates(old, new, "sluice_worker_received_packets_total");
    let wb = rates(old, new, "sluice_worker_batches_total");
    let _ = writeln!(s, "{:<8}{:>12}{:>12}{:>14}", "worker", "pkts/s", "batches/s", "pkts/batch");
    for (w, p) in &wrx {
        let b = wb.get(w).copied().unwrap_or(0.0);
        let per = if b > 0.0 { format!("{:.1}", p / b) } else { "-".into() };
        let _ = writeln!(s, "{w:<8}{:>12}{:>12}{per:>14}", si(*p), si(b));
    }
    let dropped: Vec<String> = rates(old, new, "sluice_dropped_packets_total")
        .into_iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(k, v)| format!("{k} {}", si(v)))
        .collect();
    let _ = writeln!(s, "\ndrops/s: {}", if dropped.is_empty() { "none".to_string() } else { dropped.join(", ") });
    let changes = rates(old, new, "sluice_control_changes_total").values().fold(0.0, |a, b| a + b);
    let _ = writeln!(
        s,
        "updates/s: {} ({} in all)",
        si(changes),
        si(m.get("sluice_control_changes_total", &[]).unwrap_or(0.0))
    );
    let cycles = rates(old, new, "sluice_stage_cycles_total");
    if !cycles.is_empty() {
        let packets = rates(old, new, "sluice_stage_packets_total");
        let per: Vec<String> = m
            .families()
            .iter()
            .filter(|f| f.name == "sluice_stage_cycles_total")
            .flat_map(|f| &f.samples)
            .filter_map(|smp| {
                let stage = smp.labels.first().map(|(_, v)| v.clone())?;
                let (c, p) = (cycles.get(&stage).copied()?, packets.get(&stage).copied()?);
                (p > 0.0).then(|| format!("{stage} {:.0}", c / p))
            })
            .collect();
        let _ = writeln!(s, "cycles/packet: {}", if per.is_empty() { "-".to_string() } else { per.join(", ") });
    }
    // The data plane's own counters, busiest first.
    let kind = label("data_plane");
    let prefix = format!("sluice_{kind}_");
    let mut busiest: Vec<(String, f64)> = Vec::new();
    for f in m.families().iter().filter(|f| f.kind == Kind::Counter && f.name.starts_with(&prefix)) {
        for (k, v) in rates(old, new, &f.name) {
            if v > 0.0 {
                let short = f.name.trim_start_matches(&prefix).trim_end_matches("_total");
                busiest.push((if k.is_empty() { short.to_string() } else { format!("{short}{{{k}}}") }, v));
            }
        }
    }
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if !busiest.is_empty() {
        let _ = writeln!(s, "\n{kind} counters (per second):");
        for (n, v) in busiest.iter().take(12) {
            let _ = writeln!(s, "  {n:<56}{:>12}", si(*v));
        }
    }
    s
}

/// Runs `sluice top` (see the module documentation).
pub fn run(a: &TopArgs) -> Result<(), String> {
    if a.list {
        for i in sluice_node::socket::instances(None) {
            println!("{}\t{}\t{}", i.pid, i.kind, i.name.as_deref().unwrap_or("-"));
        }
        return Ok(());
    }
    if !(a.interval.is_finite() && a.interval >= 0.1) {
        return Err(format!("--interval {}: at least 0.1 s", a.interval));
    }
    let path = sluice_node::socket::find(a.instance.as_deref(), None)?;
    let who =
        a.instance.clone().unwrap_or_else(|| path.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_string());
    let read = || -> Result<Reading, String> {
        let text = sluice_node::socket::ask(&path, "metrics")?;
        Ok(Reading { at: Instant::now(), m: Metrics::parse(&text)? })
    };
    let stop = sluice_node::Stop::new();
    sluice_node::signals::stop_on_signals(&stop);
    let terminal = std::io::stdout().is_terminal();
    let mut old = read()?;
    let mut shown = 0u64;
    while !stop.wait(Some(old.at + Duration::from_secs_f64(a.interval))) {
        let new = match read() {
            Ok(r) => r,
            Err(_) => {
                println!("sluice top: {who} is gone");
                return Ok(());
            }
        };
        let text = screen(&who, &old, &new);
        let mut out = std::io::stdout().lock();
        let _ = if terminal { write!(out, "\x1b[2J\x1b[H{text}") } else { writeln!(out, "{text}") };
        let _ = out.flush();
        old = new;
        shown += 1;
        if a.count.is_some_and(|c| shown >= c) {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(text: &str, at: Instant) -> Reading {
        Reading { at, m: Metrics::parse(text).unwrap() }
    }

    #[test]
    fn the_screen_shows_rates_from_two_readings() {
        let t0 = Instant::now();
        let head = "sluice_info{data_plane=\"p4\",version=\"0\",name=\"s1\"} 1\nsluice_workers 2\n\
                    sluice_start_time_seconds 0\n\
                    # TYPE sluice_port_received_packets_total counter\n\
                    # TYPE sluice_p4_table_hits_total counter\n";
        let old = reading(
            &format!(
                "{head}sluice_port_received_packets_total{{port=\"1\",interface=\"veth1\"}} 1000\n\
                 sluice_port_up{{port=\"1\",interface=\"veth1\"}} 1\n\
                 sluice_p4_table_hits_total{{table=\"ipv4_lpm\"}} 10\n"
            ),
            t0,
        );
        let new = reading(
            &format!(
                "{head}sluice_port_received_packets_total{{port=\"1\",interface=\"veth1\"}} 251000\n\
                 sluice_port_up{{port=\"1\",interface=\"veth1\"}} 1\n\
                 sluice_p4_table_hits_total{{table=\"ipv4_lpm\"}} 2010\n"
            ),
            t0 + Duration::from_secs(2),
        );
        let s = screen("1234", &old, &new);
        assert!(s.starts_with("sluice top: 1234 (p4 data plane \"s1\")"), "{s}");
        let port = s.lines().find(|l| l.starts_with("1 ")).expect("port 1's line");
        let cols: Vec<&str> = port.split_whitespace().collect();
        assert_eq!(cols, ["1", "veth1", "125.0k", "0.00", "0", "0.00", "0", "up"], "{s}");
        assert!(s.contains("updates/s: 0 (0 in all)"), "{s}");
        assert!(s.contains("table_hits{ipv4_lpm}"), "{s}");
        assert!(s.contains("1.0k"), "{s}");
    }
}
