//! `sluice lwaftr`: the lightweight 4over6 AFTR (`sluice_lwaftr`) with
//! Snabb's `snabb lwaftr` command line: `check` runs a configuration over
//! pcap files as the conformance corpus does, `bench` measures both
//! directions at once from memory, `generate-configuration` makes large
//! binding tables and matching traffic; `run` runs it on live interfaces,
//! `query` reads its counters and `config` reads and changes its
//! configuration while it runs (Snabb's `snabb config`), `loadtest` is the
//! load generator its live benchmark uses.

pub mod bench;
pub mod check;
pub mod generate;
pub mod loadtest;
pub mod run;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use sluice_lwaftr::conf::Config;

/// The `sluice lwaftr` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum LwaftrCommand {
    /// Run CONF over the frames of IN.V4 (internet side) and IN.V6 (B4
    /// side), write what each side emits to OUT.V4 / OUT.V6, and with
    /// COUNTERS exit non-zero unless the counters that changed equal that
    /// file exactly (Snabb's `lwaftr check`).
    Check {
        /// One interface carries both sides (frames of both inputs arrive on it).
        #[arg(long)]
        on_a_stick: bool,
        /// Write the counters that changed to COUNTERS instead of comparing with it.
        #[arg(short = 'r', long, requires = "counters")]
        regen: bool,
        /// The configuration (snabb-softwire-v3 text).
        conf: PathBuf,
        /// Frames arriving on the IPv4 side (pcap; an empty or header-only file injects nothing).
        in_v4: PathBuf,
        /// Frames arriving on the IPv6 side (pcap).
        in_v6: PathBuf,
        /// Where the frames out of the IPv4 side go (pcap).
        out_v4: PathBuf,
        /// Where the frames out of the IPv6 side go (pcap).
        out_v6: PathBuf,
        /// Expected counters (`name value` lines, Snabb's counters.txt).
        counters: Option<PathBuf>,
    },
    /// Replay IN.V4 and IN.V6 from memory through the whole lwAFTR, both
    /// directions at once, into a sink; print encapsulation and
    /// decapsulation rates every second, then a summary (Snabb's `lwaftr bench`).
    Bench {
        /// The configuration (snabb-softwire-v3 text).
        conf: PathBuf,
        /// IPv4 frames replayed into the internet side (pcap).
        in_v4: PathBuf,
        /// IPv6 frames replayed into the B4 side (pcap).
        in_v6: PathBuf,
        /// Seconds to run.
        #[arg(short = 'D', long, default_value_t = 5.0)]
        duration: f64,
        /// Worker threads; each replays all the traffic through its own replica.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
        /// One interface carries both sides.
        #[arg(long)]
        on_a_stick: bool,
        /// Hand the lwAFTR the stored frames themselves rather than through
        /// a receive ring of 128 buffers per side (traffic larger than the
        /// caches then measures reading it from DRAM as well).
        #[arg(long)]
        no_ring: bool,
    },
    /// Write a configuration with a large binding table (Snabb's
    /// `lwaftr generate-configuration`), and optionally traffic spread
    /// over its softwires.
    GenerateConfiguration {
        /// The first public IPv4 address.
        ipv4: Ipv4Addr,
        /// How many consecutive IPv4 addresses.
        num_ipv4s: u32,
        /// The lwAFTR's tunnel endpoint (br-address of every softwire, and its internal ip).
        br_address: Ipv6Addr,
        /// The first B4 address (one more per softwire).
        b4: Ipv6Addr,
        /// psid-length of every address (0: one whole-address softwire each).
        psid_len: u8,
        /// Port bits under the PSID (default 16 - PSID_LEN).
        shift: Option<u8>,
        /// Write the configuration here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Write IPv4 traffic from the internet to the softwires here (pcap).
        #[arg(long, requires = "pcap_v6")]
        pcap_v4: Option<PathBuf>,
        /// Write the matching IPv6 traffic from the B4s here (pcap).
        #[arg(long, requires = "pcap_v4")]
        pcap_v6: Option<PathBuf>,
        /// Frames per pcap (default: one per softwire, at most 1048576).
        #[arg(long)]
        packets: Option<u64>,
        /// Frame size in bytes (without FCS) of the generated traffic.
        #[arg(long, default_value_t = 550, value_parser = clap::value_parser!(u32).range(82..=9000))]
        packet_size: u32,
    },
    /// Run the lwAFTR on live interfaces until SIGINT or SIGTERM (then print
    /// the non-zero counters); serves `query` and `config` while running.
    Run {
        /// The configuration (Snabb's snabb-softwire-v3 text syntax).
        #[arg(long)]
        conf: PathBuf,
        /// External (IPv4) interface: IFACE, af_packet:IFACE or af_xdp:IFACE.
        #[arg(long, requires = "v6", conflicts_with = "on_a_stick")]
        v4: Option<String>,
        /// Internal (IPv6) interface: IFACE, af_packet:IFACE or af_xdp:IFACE.
        #[arg(long, requires = "v4")]
        v6: Option<String>,
        /// One interface carrying both sides.
        #[arg(long)]
        on_a_stick: Option<String>,
        /// Worker threads (flows spread over them).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
        /// Instance of the configuration to run (its `device`); the first by default.
        #[arg(long)]
        device: Option<String>,
        /// Queue of the instance to run; the first by default.
        #[arg(long)]
        queue: Option<u8>,
        /// A name `query`, `config` and `sluice top` can use instead of the PID.
        #[arg(short, long)]
        name: Option<String>,
        /// Serve Prometheus metrics at http://ADDR/metrics (`HOST:PORT`, or `:PORT`).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// Serve gNMI at ADDR (`HOST:PORT`): the two ports in the OpenConfig interfaces model (names, status, counters).
        #[arg(long, value_name = "ADDR")]
        gnmi: Option<String>,
        /// Stop after this many seconds (else at SIGINT or SIGTERM).
        #[arg(short = 'D', long)]
        duration: Option<f64>,
        /// Print one CSV line per second: decapsulated and encapsulated Mpps and Gbps.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Print a running instance's non-zero counters (`name: value`).
    Query {
        /// PID or --name of the instance; the only running one when omitted.
        instance: Option<String>,
        /// Only counters whose names contain this.
        filter: Option<String>,
        /// Every counter, zero or not.
        #[arg(short, long)]
        list_all: bool,
    },
    /// Snabb's load generator: replay IN.V4 into --v4 and IN.V6 into --v6 in a
    /// loop, count what comes back on the other side, print per-second
    /// Mpps and Gbps per direction.
    Loadtest {
        in_v4: PathBuf,
        in_v6: PathBuf,
        /// Interface the IPv4 frames go into (decapsulated frames come back on it).
        #[arg(long)]
        v4: String,
        /// Interface the IPv6 frames go into (encapsulated frames come back on it).
        #[arg(long)]
        v6: String,
        /// Gbps of load per direction (frame bytes); as fast as possible by default.
        #[arg(long)]
        rate: Option<f64>,
        /// Seconds of load.
        #[arg(short = 'D', long, default_value_t = 5.0)]
        duration: f64,
    },
    /// Read or change a running instance's configuration, or read its
    /// state, by snabb-softwire-v3 paths (Snabb's `snabb config`): e.g.
    /// `config add lw1 /softwire-config/binding-table/softwire '{ ipv4 ...; psid ...; ... }'`.
    Config {
        #[arg(value_parser = ["get", "get-state", "set", "add", "remove"])]
        verb: String,
        /// The schema: snabb-softwire-v3 (the only one served).
        #[arg(short = 's', long = "schema", alias = "schema-name")]
        schema: Option<String>,
        /// Output format of get and get-state: yang (default) or xpath.
        #[arg(short = 'f', long)]
        format: Option<String>,
        /// Print leaves equal to their default too.
        #[arg(long)]
        print_default: bool,
        /// PID or --name of the instance.
        instance: String,
        /// A path, e.g. /softwire-config/binding-table/softwire[ipv4=A][psid=P].
        path: String,
        /// The value of set and add; `-` or nothing: standard input.
        value: Option<String>,
    },
}

/// Runs one `sluice lwaftr` subcommand.
pub fn main(cmd: LwaftrCommand) -> Result<(), String> {
    match cmd {
        LwaftrCommand::Check { on_a_stick, regen, conf, in_v4, in_v6, out_v4, out_v6, counters } => {
            check::run(&check::CheckArgs { on_a_stick, regen, conf, in_v4, in_v6, out_v4, out_v6, counters })
        }
        LwaftrCommand::Bench { conf, in_v4, in_v6, duration, workers, on_a_stick, no_ring } => {
            let workers = workers as usize;
            bench::run(&bench::BenchArgs { conf, in_v4, in_v6, duration, workers, on_a_stick, ring: !no_ring })
        }
        LwaftrCommand::GenerateConfiguration {
            ipv4,
            num_ipv4s,
            br_address,
            b4,
            psid_len,
            shift,
            output,
            pcap_v4,
            pcap_v6,
            packets,
            packet_size,
        } => generate::run(&generate::GenerateArgs {
            ipv4,
            num_ipv4s,
            br_address,
            b4,
            psid_len,
            shift,
            output,
            pcaps: pcap_v4.zip(pcap_v6),
            packets,
            packet_size: packet_size as usize,
        }),
        LwaftrCommand::Run {
            conf,
            v4,
            v6,
            on_a_stick,
            workers,
            device,
            queue,
            name,
            metrics,
            gnmi,
            duration,
            verbose,
        } => {
            let workers = workers as usize;
            run::run(&run::RunArgs {
                conf,
                v4,
                v6,
                on_a_stick,
                workers,
                device,
                queue,
                name,
                duration,
                verbose,
                metrics,
                gnmi,
            })
        }
        LwaftrCommand::Loadtest { in_v4, in_v6, v4, v6, rate, duration } => {
            loadtest::loadtest(&loadtest::LoadtestArgs { in_v4, in_v6, v4, v6, rate, duration })
        }
        LwaftrCommand::Query { instance, filter, list_all } => {
            run::query(instance.as_deref(), filter.as_deref(), list_all)
        }
        LwaftrCommand::Config { verb, schema, format, print_default, instance, path, value } => {
            run::config(&run::ConfigArgs { verb, schema, format, print_default, instance, path, value })
        }
    }
}

/// Reads a configuration file; errors name the file, line and path in the tree.
pub fn load_conf(path: &Path) -> Result<Config, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Config::parse(&text, &path.display().to_string()).map_err(|e| e.to_string())
}

/// The allocator of the `sluice` binary: the system's, asking the kernel
/// for transparent huge pages for every large block.
///
/// Why: a million-softwire binding table (or a million-route P4 table)
/// is arrays of tens of MB read at random; on 4 KiB pages nearly every
/// lookup also misses the TLB. Where transparent huge pages are enabled
/// only on request (`madvise`, a common default), nothing else asks.
/// The advice is given before the block is first written, so its pages
/// are faulted in as huge pages where the kernel has them; it is a hint
/// and changes nothing else.
pub struct Allocator;

/// Blocks at least this large are advised.
const HUGE_BLOCK: usize = 4 << 20;

fn advise(ptr: *mut u8, size: usize) {
    if ptr.is_null() || size < HUGE_BLOCK {
        return;
    }
    // madvise wants a page-aligned start: advise the whole pages inside the block.
    let page = 4096usize;
    let start = (ptr as usize).div_ceil(page) * page;
    let end = (ptr as usize + size) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside the block just allocated, which
        // this process owns; MADV_HUGEPAGE changes no contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// advice only concerns pages of blocks it returned.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = unsafe { std::alloc::System.alloc(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        advise(p, new_size);
        p
    }
}
