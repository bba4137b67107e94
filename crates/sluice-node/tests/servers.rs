//! The node's own servers on a data plane without workers: the control
//! socket (its protocol, its built-in verbs, a handler's verbs, refusals)
//! and the metrics over HTTP (what Prometheus asks, and what it must not
//! get), each run on its thread and stopped as the node stops them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use sluice_dataplane::{Metrics, NullForward};
use sluice_node::metrics::MetricsServer;
use sluice_node::socket::{ask, ControlSocket, Handler};
use sluice_node::{Control, Server, Stop};

/// Starts `server` on `control` in a thread; returns the stop and the thread.
fn serve<S: Server<NullForward>>(
    mut server: S,
    control: &Control<NullForward>,
) -> (Stop, std::thread::JoinHandle<S>, String) {
    let line = server.start(control).unwrap();
    let (stop, c) = (Stop::new(), control.clone());
    let s = stop.clone();
    let t = std::thread::spawn(move || {
        server.run(&c, &s);
        server
    });
    (stop, t, line)
}

/// Counts the changes made through it, and says so.
struct Changer;

impl Handler<NullForward> for Changer {
    fn verbs(&self) -> &'static [&'static str] {
        &["swap"]
    }

    fn answer(&mut self, control: &Control<NullForward>, _verb: &str, rest: &str) -> Result<String, String> {
        let (a, b) = rest.trim().split_once(' ').ok_or("swap A B")?;
        let (a, b): (u32, u32) = (a.parse().map_err(|_| "not a port")?, b.parse().map_err(|_| "not a port")?);
        control.apply(move |d, _| {
            *d = NullForward::new(a, b);
            Ok::<(), String>(())
        })?;
        Ok(format!("ports {a} and {b}\n"))
    }
}

#[test]
fn the_control_socket_answers_its_verbs_and_a_handlers_and_refuses_the_rest() {
    let dir = std::env::temp_dir().join(format!("sluice-node-socket-{}", std::process::id()));
    std::env::set_var("SLUICE_RUN_DIR", &dir);
    let control = Control::standalone(NullForward::new(1, 2), "null-forward");
    let socket = ControlSocket::new(Some("nf")).unwrap().with(Changer);
    let (stop, thread, line) = serve(socket, &control);
    let by_pid: PathBuf = dir.join(format!("{}.sock", std::process::id()));
    assert!(line.contains(&by_pid.display().to_string()), "{line}");
    let by_name = dir.join("nf.sock");

    let info = ask(&by_name, "info").unwrap();
    assert!(info.contains(&format!("pid {}\n", std::process::id())) && info.contains("kind null-forward\n"), "{info}");
    assert_eq!(ask(&by_pid, "swap 3 4").unwrap(), "ports 3 and 4\n");
    assert_eq!(ask(&by_pid, "swap 3").unwrap_err(), "swap A B");
    let e = ask(&by_pid, "frobnicate").unwrap_err();
    assert!(e.starts_with("unknown request \"frobnicate\"") && e.contains("swap"), "{e}");
    // The metrics say what happened: one change, no worker.
    let m = Metrics::parse(&ask(&by_pid, "metrics").unwrap()).unwrap();
    assert_eq!(m.get("sluice_control_changes_total", &[]), Some(1.0));
    assert_eq!(m.get("sluice_workers", &[]), Some(0.0));
    assert_eq!(m.get("sluice_info", &[("data_plane", "null-forward")]), Some(1.0));
    // A second instance of the same name is refused while this one serves.
    let e = ControlSocket::<NullForward>::new(Some("nf")).unwrap().start(&control).unwrap_err();
    assert!(e.contains("another instance serves this name"), "{e}");
    assert!(ControlSocket::<NullForward>::new(Some("12")).is_err(), "a number is no name");

    stop.set();
    let mut socket = thread.join().unwrap();
    socket.finish(&control);
    assert!(!by_pid.exists() && !by_name.exists(), "the sockets are removed at the end");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends `request` to `addr` and returns the whole answer.
fn http(addr: std::net::SocketAddr, request: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn metrics_over_http_answer_prometheus_and_refuse_what_is_not_a_scrape() {
    let control = Control::standalone(NullForward::new(1, 2), "null-forward");
    let server = MetricsServer::new("127.0.0.1:0");
    let (stop, thread, line) = serve(server, &control);
    let addr: std::net::SocketAddr =
        line.rsplit("http://").next().and_then(|s| s.strip_suffix("/metrics")).unwrap().parse().unwrap();

    let ok = http(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n");
    let (head, body) = ok.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    let m = Metrics::parse(body).unwrap();
    assert_eq!(m.get("sluice_info", &[("data_plane", "null-forward")]), Some(1.0));
    assert!(http(addr, "GET /?x=1 HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200 OK"));
    assert!(http(addr, "HEAD /metrics HTTP/1.1\r\n\r\n").ends_with("\r\n\r\n"), "HEAD has no body");
    assert!(http(addr, "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(http(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let long = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    assert!(http(addr, &long).starts_with("HTTP/1.1 431"));

    stop.set();
    let mut server = thread.join().unwrap();
    let report = server.finish(&control);
    assert_eq!(report, vec!["metrics: 3 scrape(s) answered, 3 request(s) refused".to_string()]);
}
