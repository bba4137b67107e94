//! Telemetry of every data plane, read by the tools users read it with:
//! a real Prometheus server (Debian's) scrapes `--metrics` of the P4
//! switch, the lwAFTR and the OpenFlow switch, and its answers match the
//! frames each was sent, and so do their gNMI servers (`--gnmi`, read
//! with pygnmi); `sluice top`, run in a terminal multiplexer
//! (tmux), shows a rate while traffic flows.
//!
//! Everything runs in two network namespaces the test makes (a switch
//! namespace holding the three data planes and Prometheus, a hosts
//! namespace holding the far ends of their ports, IPv6 off so that no host
//! sends anything of its own) and removes. Frames are sent by a raw
//! socket, counted exactly. Waits are for events (a scrape that shows the
//! count), bounded far above any machine's pace.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::lab::{sh, Kill, SLUICE};

struct Net {
    sw: String,
    hosts: String,
    dir: PathBuf,
    procs: Vec<Kill>,
}

impl Drop for Net {
    fn drop(&mut self) {
        self.procs.clear();
        for n in [&self.sw, &self.hosts] {
            let _ = Command::new("ip").args(["netns", "del", n]).stderr(Stdio::null()).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn require(tools: &[&str]) {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the telemetry tests need root (network namespaces)");
    for t in tools {
        let ok = Command::new("sh").args(["-c", &format!("command -v {t}")]).stdout(Stdio::null()).status();
        assert!(ok.is_ok_and(|s| s.success()), "{t} is not installed: run scripts/test.sh (it installs it)");
    }
}

impl Net {
    fn new(tag: &str) -> Net {
        let id = format!("{tag}{}", std::process::id());
        let dir = std::env::temp_dir().join(format!("sluice-telemetry-{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let net = Net { sw: format!("{id}-sw"), hosts: format!("{id}-h"), dir, procs: Vec::new() };
        for n in [&net.sw, &net.hosts] {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
            for k in ["all", "default"] {
                sh(&["ip", "netns", "exec", n, "sysctl", "-q", "-w", &format!("net.ipv6.conf.{k}.disable_ipv6=1")]);
            }
        }
        net
    }

    /// A veth pair: `sw_if` in the switch namespace, `host_if` in the hosts'.
    fn link(&self, sw_if: &str, host_if: &str) {
        sh(&[
            "ip",
            "link",
            "add",
            sw_if,
            "netns",
            &self.sw,
            "type",
            "veth",
            "peer",
            "name",
            host_if,
            "netns",
            &self.hosts,
        ]);
        sh(&["ip", "-n", &self.sw, "link", "set", sw_if, "up"]);
        sh(&["ip", "-n", &self.hosts, "link", "set", host_if, "up"]);
    }

    /// Starts `sluice ARGS` in the switch namespace; waits until its log says `ready`.
    fn sluice(&mut self, name: &str, args: &[&str], ready: &str) {
        let log = self.dir.join(format!("{name}.log"));
        let child = Command::new("ip")
            .args(["netns", "exec", &self.sw, SLUICE])
            .args(args)
            .stdout(std::fs::File::create(self.dir.join(format!("{name}.out"))).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        self.procs.push(Kill(child));
        let t = Instant::now();
        while !std::fs::read_to_string(&log).unwrap_or_default().contains(ready) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(t.elapsed() < Duration::from_secs(60), "{name} did not start:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `frames` (raw Ethernet) `times` times out of `iface` of the hosts' namespace.
    fn send(&self, iface: &str, frames: &[Vec<u8>], times: usize) {
        let hex: Vec<String> = frames.iter().map(|f| f.iter().map(|b| format!("{b:02x}")).collect()).collect();
        let script = format!(
            "import socket\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('{iface}',0))\n\
             fs=[bytes.fromhex(h) for h in {hex:?}]\nfor _ in range({times}):\n    for f in fs:\n        s.send(f)\n"
        );
        sh(&["ip", "netns", "exec", &self.hosts, "python3", "-c", &script]);
    }

    /// Runs `cmd` in the switch namespace.
    fn in_sw(&self, cmd: &[&str]) -> String {
        let mut a = vec!["ip", "netns", "exec", &self.sw];
        a.extend_from_slice(cmd);
        sh(&a)
    }
}

/// An Ethernet/IPv4/UDP frame of 64 bytes from `src` to `dst` with a valid header checksum.
fn udp_frame(dst_mac: [u8; 6], src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let sum: u32 = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!((sum & 0xffff) + (sum >> 16)) as u16).to_be_bytes());
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&4001u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// The frames of a pcap file.
fn pcap_frames(p: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(p).unwrap();
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= b.len() {
        let n = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]) as usize;
        out.push(b[at + 16..at + 16 + n].to_vec());
        at += 16 + n;
    }
    out
}

/// The value Prometheus (in the switch namespace, port 9190) gives `query`, if any.
fn prometheus_value(net: &Net, query: &str) -> Option<f64> {
    let out = Command::new("ip")
        .args(["netns", "exec", &net.sw, "curl", "-s", "-G", "http://127.0.0.1:9190/api/v1/query"])
        .args(["--data-urlencode", &format!("query={query}")])
        .output()
        .ok()?;
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    j["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// Waits until Prometheus gives `query` the value `want`.
fn prometheus_shows(net: &Net, query: &str, want: f64) {
    let t = Instant::now();
    loop {
        let got = prometheus_value(net, query);
        if got == Some(want) {
            return;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let targets = net.in_sw(&["curl", "-s", "http://127.0.0.1:9190/api/v1/targets"]);
            panic!("Prometheus gives {query} = {got:?}, not {want}; targets: {targets}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn prometheus_scrapes_each_data_plane_and_its_counts_match_the_frames_sent() {
    require(&["ip", "python3", "curl", "prometheus", "ovs-ofctl"]);
    let mut net = Net::new("tm");
    let router = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/router.json");
    let dir = net.dir.clone();

    // The P4 router: 10.0.2.0/24 out of port 2.
    net.link("p4-1", "h-p4-1");
    net.link("p4-2", "h-p4-2");
    let commands = dir.join("router.txt");
    std::fs::write(
        &commands,
        "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.2.0/24 => 2\n\
         table_add RouterIngress.nexthop RouterIngress.forward 2 => 2 02:00:00:00:02:fe 02:00:00:00:02:01\n",
    )
    .unwrap();
    let r = router.to_str().unwrap();
    let c = commands.to_str().unwrap();
    net.sluice(
        "p4",
        &["simple_switch", "-i", "1@p4-1", "-i", "2@p4-2", "--metrics", "127.0.0.1:9101", "--commands", c, r],
        "forwarding on",
    );

    // The lwAFTR with a generated table and traffic toward its softwires.
    net.link("lw-4", "h-lw-4");
    net.link("lw-6", "h-lw-6");
    let (conf, v4) = (dir.join("lw.conf"), dir.join("v4.pcap"));
    let gen = Command::new(SLUICE)
        .args(["lwaftr", "generate-configuration", "193.5.1.100", "1", "fc00::100", "fc00:1:2:3:4:5:0:7e", "6"])
        .args(["--output", conf.to_str().unwrap(), "--pcap-v4", v4.to_str().unwrap()])
        .args(["--pcap-v6", dir.join("v6.pcap").to_str().unwrap(), "--packets", "10", "--packet-size", "100"])
        .output()
        .unwrap();
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let conf_s = conf.to_str().unwrap();
    net.sluice(
        "lwaftr",
        &[
            "lwaftr",
            "run",
            "--conf",
            conf_s,
            "--v4",
            "lw-4",
            "--v6",
            "lw-6",
            "--metrics",
            "127.0.0.1:9102",
            "--gnmi",
            "127.0.0.1:9112",
        ],
        "running with",
    );

    // The OpenFlow switch, one flow from port 1 to port 2.
    net.link("of-1", "h-of-1");
    net.link("of-2", "h-of-2");
    net.sluice(
        "openflow",
        &[
            "openflow",
            "-i",
            "1@of-1",
            "-i",
            "2@of-2",
            "--listen",
            "ptcp:6653:127.0.0.1",
            "--metrics",
            "127.0.0.1:9103",
            "--gnmi",
            "127.0.0.1:9113",
        ],
        "listening on",
    );
    net.in_sw(&["ovs-ofctl", "-O", "OpenFlow13", "add-flow", "tcp:127.0.0.1:6653", "in_port=1,actions=output:2"]);

    // Prometheus, scraping all three every second.
    let yml = dir.join("prometheus.yml");
    std::fs::write(
        &yml,
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: sluice\n    \
         static_configs:\n      - targets: ['127.0.0.1:9101', '127.0.0.1:9102', '127.0.0.1:9103']\n",
    )
    .unwrap();
    let prom = Command::new("ip")
        .args(["netns", "exec", &net.sw, "prometheus", &format!("--config.file={}", yml.display())])
        .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
        .args(["--web.listen-address=127.0.0.1:9190", "--log.level=warn"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    net.procs.push(Kill(prom));

    // The traffic: 500 frames to route, 100 to encapsulate, 300 to switch.
    let to_route = udp_frame([2, 0, 0, 0, 1, 0xfe], [10, 0, 1, 1], [10, 0, 2, 99]);
    net.send("h-p4-1", &[to_route], 500);
    net.send("h-lw-4", &pcap_frames(&v4), 10);
    net.send("h-of-1", &[udp_frame([2, 0, 0, 0, 9, 9], [10, 9, 0, 1], [10, 9, 0, 2])], 300);

    for t in ["127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9103"] {
        prometheus_shows(&net, &format!("up{{instance=\"{t}\"}}"), 1.0);
    }
    let p4 = "instance=\"127.0.0.1:9101\"";
    prometheus_shows(&net, &format!("sluice_port_received_packets_total{{{p4},port=\"1\"}}"), 500.0);
    prometheus_shows(&net, &format!("sluice_port_sent_packets_total{{{p4},port=\"2\"}}"), 500.0);
    prometheus_shows(&net, &format!("sluice_port_sent_bytes_total{{{p4},port=\"2\"}}"), 30_000.0);
    prometheus_shows(&net, &format!("sluice_p4_table_entries{{{p4},table=\"RouterIngress.ipv4_lpm\"}}"), 1.0);
    prometheus_shows(&net, &format!("sluice_control_changes_total{{{p4}}}"), 0.0);
    prometheus_shows(&net, &format!("sluice_info{{{p4},data_plane=\"p4\"}}"), 1.0);
    let lw = "instance=\"127.0.0.1:9102\"";
    prometheus_shows(&net, &format!("sluice_lwaftr_in_ipv4_packets_total{{{lw}}}"), 100.0);
    prometheus_shows(&net, &format!("sluice_lwaftr_out_ipv6_packets_total{{{lw}}}"), 100.0);
    prometheus_shows(&net, &format!("sluice_port_sent_packets_total{{{lw},port=\"1\"}}"), 100.0);
    let softwires = std::fs::read_to_string(&conf).unwrap().matches("psid ").count();
    prometheus_shows(&net, &format!("sluice_lwaftr_softwires{{{lw}}}"), softwires as f64);
    let of = "instance=\"127.0.0.1:9103\"";
    prometheus_shows(&net, &format!("sluice_openflow_table_lookups_total{{{of},table=\"0\"}}"), 300.0);
    prometheus_shows(&net, &format!("sluice_openflow_table_matches_total{{{of},table=\"0\"}}"), 300.0);
    prometheus_shows(&net, &format!("sluice_openflow_table_flows{{{of},table=\"0\"}}"), 1.0);
    prometheus_shows(&net, &format!("sluice_port_sent_packets_total{{{of},port=\"2\"}}"), 300.0);
    // The flow-mod, and the code compiled for the table since, are changes.
    prometheus_shows(&net, &format!("count(sluice_control_changes_total{{{of}}} > 0)"), 1.0);

    // The same counts over gNMI (`--gnmi`), read by pygnmi.
    let gnmi = |addr: &str| -> serde_json::Value {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let python = repo.join(".venv/finsy/bin/python");
        let script = repo.join("tests/p4runtime/pygnmi_client.py");
        let out = net.in_sw(&[python.to_str().unwrap(), script.to_str().unwrap(), "--addr", addr, "counters"]);
        serde_json::from_str(out.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let of = gnmi("127.0.0.1:9113");
    assert_eq!(of["of-1"]["in-pkts"], 300, "{of}");
    assert_eq!(of["of-1"]["in-unicast-pkts"], 300, "{of}");
    assert_eq!(of["of-2"]["out-pkts"], 300, "{of}");
    let lw = gnmi("127.0.0.1:9112");
    assert_eq!(lw["lw-4"]["in-pkts"], 100, "{lw}");
    assert_eq!(lw["lw-6"]["out-pkts"], 100, "{lw}");
}

#[test]
fn sluice_top_in_a_terminal_shows_the_rates_of_a_running_switch() {
    require(&["ip", "python3", "tmux"]);
    let mut net = Net::new("tt");
    net.link("s-1", "h-1");
    net.link("s-2", "h-2");
    let name = format!("top{}", std::process::id());
    let dir = net.dir.clone();
    let commands = dir.join("router.txt");
    std::fs::write(
        &commands,
        "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.2.0/24 => 2\n\
         table_add RouterIngress.nexthop RouterIngress.forward 2 => 2 02:00:00:00:02:fe 02:00:00:00:02:01\n",
    )
    .unwrap();
    let router = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/router.json");
    net.sluice(
        "p4",
        &[
            "simple_switch",
            "-i",
            "1@s-1",
            "-i",
            "2@s-2",
            "--thrift-port",
            "19191",
            "--name",
            &name,
            "--commands",
            commands.to_str().unwrap(),
            router.to_str().unwrap(),
        ],
        "forwarding on",
    );
    // Traffic for as long as top needs: a frame every millisecond or so.
    let frame = udp_frame([2, 0, 0, 0, 1, 0xfe], [10, 0, 1, 1], [10, 0, 2, 99]);
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    let sender = Command::new("ip")
        .args(["netns", "exec", &net.hosts, "python3", "-c"])
        .arg(format!(
            "import socket,time\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('h-1',0))\n\
             f=bytes.fromhex('{hex}')\nend=time.time()+600\nwhile time.time()<end:\n    s.send(f)\n    time.sleep(0.001)\n"
        ))
        .spawn()
        .unwrap();
    net.procs.push(Kill(sender));
    let session = format!("sluice-top-{}", std::process::id());
    struct Tmux(String);
    impl Drop for Tmux {
        fn drop(&mut self) {
            let _ = Command::new("tmux").args(["kill-session", "-t", &self.0]).stderr(Stdio::null()).status();
        }
    }
    sh(&[
        "tmux",
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "40",
        &format!("{SLUICE} top {name}; echo '[top exited' $?']'; exec sleep 600"),
    ]);
    let _tmux = Tmux(session.clone());
    // The screen, once it shows port 1 receiving.
    let t = Instant::now();
    let (screen, rate) = loop {
        let screen = sh(&["tmux", "capture-pane", "-p", "-t", &session]);
        let rate = screen
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["1", "s-1"]))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_string));
        match rate {
            Some(r) if r != "0" => break (screen, r),
            _ => {}
        }
        assert!(!screen.contains("[top exited"), "sluice top ended:\n{screen}");
        assert!(t.elapsed() < Duration::from_secs(60), "no rate on port 1 within 60 s:\n{screen}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(screen.contains(&format!("sluice top: {name} (p4 data plane \"{name}\")")), "{screen}");
    // A rate as top prints it: a number, with a k or M suffix past a thousand.
    let value: f64 = rate.trim_end_matches(['k', 'M', 'G']).parse().unwrap_or_else(|_| panic!("{rate}: {screen}"));
    assert!(value > 0.0, "{screen}");
    let port2 = screen.lines().find(|l| l.split_whitespace().take(2).eq(["2", "s-2"])).expect("port 2's line");
    let tx: Vec<&str> = port2.split_whitespace().collect();
    assert!(tx.len() >= 8 && tx[4] != "0" && tx[7] == "up", "port 2 sends what port 1 receives: {port2}\n{screen}");
    // The commands were applied before the switch started: no update since.
    assert!(screen.contains("updates/s: 0 (0 in all)"), "{screen}");
}
