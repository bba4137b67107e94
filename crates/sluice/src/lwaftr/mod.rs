//! `sluice lwaftr`: Snabb's lwAFTR commands on Sluice's lwAFTR data plane
//! (`sluice_lwaftr`).

pub mod loadtest;
pub mod run;

use std::path::PathBuf;

use clap::Subcommand;

/// The `sluice lwaftr` subcommands.
#[derive(Subcommand, Debug)]
pub enum LwaftrCommand {
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
        /// A name `query` and `config` can use instead of the PID.
        #[arg(short, long)]
        name: Option<String>,
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
    /// Add or remove softwires of a running instance, without a restart.
    Config {
        #[arg(value_parser = ["add", "remove"])]
        verb: String,
        /// PID or --name of the instance.
        instance: String,
        /// `softwire { ... }` blocks (remove also takes
        /// /softwire-config/binding-table/softwire[ipv4=A][psid=P] paths);
        /// `-` or nothing: read standard input.
        text: Option<String>,
    },
}

/// Runs one `sluice lwaftr` subcommand.
pub fn main(cmd: LwaftrCommand) -> Result<(), String> {
    match cmd {
        LwaftrCommand::Run { conf, v4, v6, on_a_stick, workers, device, queue, name, duration, verbose } => {
            let workers = workers as usize;
            run::run(&run::RunArgs { conf, v4, v6, on_a_stick, workers, device, queue, name, duration, verbose })
        }
        LwaftrCommand::Loadtest { in_v4, in_v6, v4, v6, rate, duration } => {
            loadtest::loadtest(&loadtest::LoadtestArgs { in_v4, in_v6, v4, v6, rate, duration })
        }
        LwaftrCommand::Query { instance, filter, list_all } => {
            run::query(instance.as_deref(), filter.as_deref(), list_all)
        }
        LwaftrCommand::Config { verb, instance, text } => run::config(&verb, &instance, text.as_deref()),
    }
}
