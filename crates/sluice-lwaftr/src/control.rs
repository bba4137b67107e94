//! The lwAFTR's control server: what Snabb's users type at a running
//! lwAFTR (`snabb config get|set|add|remove|get-state` with the
//! `snabb-softwire-v3` schema's paths, `snabb lwaftr query`), answered as
//! verbs of the node's control socket (`sluice_node::socket`).
//!
//! Contract. Reads: a request's verb, options, path and value (untrusted
//! text). Writes: the running configuration this server keeps (the one
//! source of truth for `get`), and the data plane through the node's
//! [`Control`]: a change of softwires only is applied in place, every
//! worker between two batches (`Control::apply`), the other softwires
//! forwarding on; a change of what the queue runs with (addresses, MTUs,
//! filters, ICMP policy...) builds the data plane anew from the new
//! configuration and replaces it on every worker (its counters start
//! again, as Snabb's do when its apps restart: `discontinuity-time` says
//! when); a change of nothing the queue runs with (the name, another
//! instance, the table's version) touches no worker. A request that fails
//! changes nothing, and its answer says why in Snabb's wording.
//!
//! Requests (one per connection, see `sluice_node::socket`):
//! - `counters`, `counters-all`: the non-zero (or every) counter,
//!   `name: value` lines in name order (`sluice lwaftr query`);
//! - `get|get-state [--format yang|xpath] [--print-default] PATH`;
//! - `set|add [...] PATH`, then the value on the following lines;
//! - `remove PATH`.

use std::time::{SystemTime, UNIX_EPOCH};

use sluice_node::socket::Handler;
use sluice_node::Control;

use crate::conf::data::{self, Change, Format, PrintOptions};
use crate::conf::Config;
use crate::counters::Counters;
use crate::{Lwaftr, Options};

/// The non-zero counters (every counter with `zeros`), `name: value` lines
/// in name order (Snabb's block, then Sluice's own), keeping names that
/// contain `filter`.
pub fn format_counters(c: &Counters, filter: Option<&str>, zeros: bool) -> String {
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

/// The lwAFTR's verbs on the control socket (see the module documentation).
pub struct ConfigServer {
    /// The configuration as it runs now.
    running: Config,
    /// The instance and queue this process runs.
    device: Option<String>,
    queue: Option<u8>,
    opts: Options,
    /// When the counters last started from zero (start, or a rebuild), in Unix seconds.
    discontinuity: u64,
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl ConfigServer {
    /// The server of a data plane built from `running` for `device` and
    /// `queue` with `opts` (as `Lwaftr::for_queue` was called).
    pub fn new(running: Config, device: Option<String>, queue: Option<u8>, opts: Options) -> ConfigServer {
        ConfigServer { running, device, queue, opts, discontinuity: unix_now() }
    }

    /// The device this process runs (the first instance's when none was named).
    fn device(&self) -> String {
        match &self.device {
            Some(d) => d.clone(),
            None => self.running.instances.first().map_or_else(String::new, |i| i.device.clone()),
        }
    }

    /// Applies what an edit of `self.running` changed to the data plane;
    /// on failure `before` is put back.
    fn apply(&mut self, control: &Control<Lwaftr>, change: Change, before: Option<Config>) -> Result<(), String> {
        let result = match change {
            Change::Softwires { removed, added } => control.apply(move |d: &mut Lwaftr, _| {
                let bt = d.binding_table_mut();
                for (ip, psid) in &removed {
                    bt.remove(*ip, *psid);
                }
                for s in &added {
                    bt.add(s)?;
                }
                Ok::<(), String>(())
            }),
            Change::Other => {
                let (device, queue) = (self.device.as_deref(), self.queue);
                let now = self.running.queue_settings(device, queue);
                let was = control.view(|d| d.settings().clone());
                match now {
                    Err(e) => Err(format!("the running queue would have no configuration: {e}")),
                    Ok(s) if s == was => Ok(()),
                    Ok(_) => Lwaftr::for_queue(&self.running, device, queue, self.opts).and_then(|plane| {
                        control.lock().replace(plane)?;
                        self.discontinuity = unix_now();
                        Ok(())
                    }),
                }
            }
        };
        if result.is_err() {
            if let Some(b) = before {
                self.running = b;
            }
        }
        result
    }
}

/// `[--format F] [--print-default] PATH`: the options and the path.
fn options(line: &str) -> Result<(PrintOptions, &str), String> {
    let mut opts = PrintOptions::default();
    let mut rest = line.trim();
    loop {
        if let Some(r) = rest.strip_prefix("--print-default") {
            opts.print_default = true;
            rest = r.trim_start();
        } else if let Some(r) = rest.strip_prefix("--format") {
            let r = r.trim_start();
            let (f, r) = r.split_once(char::is_whitespace).unwrap_or((r, ""));
            opts.format = match f {
                "yang" => Format::Yang,
                "xpath" => Format::Xpath,
                other => return Err(format!("Not valid output format: {other} (yang, xpath)")),
            };
            rest = r.trim_start();
        } else {
            break;
        }
    }
    if rest.is_empty() {
        return Err("missing path argument".into());
    }
    Ok((opts, rest))
}

impl Handler<Lwaftr> for ConfigServer {
    fn verbs(&self) -> &'static [&'static str] {
        &["counters", "counters-all", "get", "get-state", "set", "add", "remove"]
    }

    fn answer(&mut self, control: &Control<Lwaftr>, verb: &str, rest: &str) -> Result<String, String> {
        let (line, value) = rest.split_once('\n').unwrap_or((rest, ""));
        match verb {
            "counters" => Ok(control.read(|d| format_counters(d.lw_counters(), None, false))),
            "counters-all" => Ok(control.read(|d| format_counters(d.lw_counters(), None, true))),
            "get" => {
                let (opts, path) = options(line)?;
                self.running.get(path, opts)
            }
            "get-state" => {
                let (opts, path) = options(line)?;
                let c = control.read(|d| *d.lw_counters());
                let counters: Vec<(&str, u64)> = c.snabb.iter().collect();
                data::get_state(path, &counters, &self.device(), &data::date_and_time(self.discontinuity), opts)
            }
            "set" | "add" | "remove" => {
                let (_, path) = options(line)?;
                // A change of softwires only is undone by the edit itself on
                // failure; anything else may need the whole configuration back.
                let before =
                    (!path.starts_with("/softwire-config/binding-table/softwire")).then(|| self.running.clone());
                let change = match verb {
                    "set" => self.running.set(path, value)?,
                    "add" => self.running.add(path, value)?,
                    _ => self.running.remove(path)?,
                };
                self.apply(control, change, before)?;
                Ok(String::new())
            }
            v => Err(format!("unknown request {v:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_print_non_zero_sorted() {
        let mut c = Counters::default();
        c.snabb.out_ipv4_packets = 2;
        c.snabb.in_ipv4_packets = 5;
        c.extra.malformed = 1;
        assert_eq!(
            format_counters(&c, None, false),
            "in-ipv4-packets: 5\nout-ipv4-packets: 2\nsluice-malformed-frames: 1\n"
        );
        assert_eq!(format_counters(&c, Some("out"), false), "out-ipv4-packets: 2\n");
        assert!(format_counters(&c, None, true).contains("drop-all-ipv4-iface-bytes: 0\n"));
    }

    #[test]
    fn request_options_and_path() {
        let (o, p) = options("--format xpath --print-default /softwire-state").unwrap();
        assert_eq!((o.format, o.print_default, p), (Format::Xpath, true, "/softwire-state"));
        assert!(options("--format json /").unwrap_err().contains("Not valid output format"));
        assert_eq!(options("  ").unwrap_err(), "missing path argument");
    }
}
