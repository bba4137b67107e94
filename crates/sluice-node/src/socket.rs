//! The node's control socket: a Unix socket per running instance,
//! `<run dir>/<pid>.sock` (and `<name>.sock` for an instance given a
//! name), where local tools ask questions: `sluice top` reads the metrics,
//! `sluice lwaftr query` the lwAFTR's counters, `sluice lwaftr config`
//! reads and changes its configuration.
//!
//! Protocol: a client connects, writes one request and shuts its side
//! down; the node answers and closes. A request is a verb, then
//! whitespace and the rest (arguments and text, several lines allowed).
//! An answer that starts with `error: ` is a refusal, with the reason.
//! Built-in verbs: `metrics` (the exposition text of `crate::metrics`),
//! `info` (`pid`, `kind`, `name` lines). A [`Handler`] adds its own.
//!
//! Bounds: one request at a time; a request of more than [`MAX_REQUEST`]
//! bytes, or a client silent for [`CLIENT_TIMEOUT`], is answered with an
//! error and closed, so a stuck client holds the socket for that long at
//! most.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_dataplane::{DataPlane, Stop};

use crate::{Control, Server};

/// The largest request read (a configuration of a million softwires fits).
pub const MAX_REQUEST: usize = 256 << 20;

/// How long a client may take to send its request or read its answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where instances serve their sockets: `$SLUICE_RUN_DIR`, else
/// `/run/sluice` (created if need be), else `sluice-<uid>` in the
/// temporary folder when `/run` is not writable.
pub fn run_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SLUICE_RUN_DIR") {
        return PathBuf::from(d);
    }
    let run = PathBuf::from("/run/sluice");
    if std::fs::create_dir_all(&run).is_ok() && writable(&run) {
        return run;
    }
    // SAFETY: getuid has no preconditions.
    std::env::temp_dir().join(format!("sluice-{}", unsafe { libc::getuid() }))
}

fn writable(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: a NUL-terminated path; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Verbs a data plane adds to the control socket (the lwAFTR's
/// configuration and counters).
pub trait Handler<D: DataPlane>: Send + 'static {
    /// The verbs it answers.
    fn verbs(&self) -> &'static [&'static str];
    /// The answer to `verb` with the rest of the request, or why not.
    fn answer(&mut self, control: &Control<D>, verb: &str, rest: &str) -> Result<String, String>;
}

/// The control socket as a server of the node.
pub struct ControlSocket<D: DataPlane> {
    paths: Vec<PathBuf>,
    listeners: Vec<UnixListener>,
    handlers: Vec<Box<dyn Handler<D>>>,
    served: u64,
}

impl<D: DataPlane> ControlSocket<D> {
    /// A socket for this process, and for `name` too when given one.
    pub fn new(name: Option<&str>) -> Result<ControlSocket<D>, String> {
        let dir = run_dir();
        let mut paths = vec![dir.join(format!("{}.sock", std::process::id()))];
        if let Some(n) = name {
            if n.is_empty() || n.contains('/') || n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("name {n:?}: a name is a word without '/' that is not a number"));
            }
            paths.push(dir.join(format!("{n}.sock")));
        }
        Ok(ControlSocket { paths, listeners: Vec::new(), handlers: Vec::new(), served: 0 })
    }

    /// Adds a handler's verbs.
    pub fn with(self, h: impl Handler<D>) -> ControlSocket<D> {
        self.with_boxed(Box::new(h))
    }

    /// Adds a handler's verbs.
    pub fn with_boxed(mut self, h: Box<dyn Handler<D>>) -> ControlSocket<D> {
        self.handlers.push(h);
        self
    }

    fn answer(&mut self, control: &Control<D>, req: &str) -> Result<String, String> {
        let req = req.trim_start();
        let (verb, rest) = req.split_once(char::is_whitespace).unwrap_or((req, ""));
        match verb {
            "metrics" => Ok(control.metrics().to_text()),
            "info" => Ok(format!(
                "pid {}\nkind {}\nname {}\n",
                std::process::id(),
                control.kind(),
                control.name().unwrap_or("-")
            )),
            v => match self.handlers.iter_mut().find(|h| h.verbs().contains(&v)) {
                Some(h) => h.answer(control, v, rest),
                None => {
                    let mut all = vec!["metrics", "info"];
                    for h in &self.handlers {
                        all.extend_from_slice(h.verbs());
                    }
                    Err(format!("unknown request {v:?} (known: {})", all.join(", ")))
                }
            },
        }
    }

    fn serve(&mut self, control: &Control<D>, mut conn: UnixStream) {
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(CLIENT_TIMEOUT));
        let _ = conn.set_write_timeout(Some(CLIENT_TIMEOUT));
        let mut req = Vec::new();
        let answer = match (&mut conn).take(MAX_REQUEST as u64 + 1).read_to_end(&mut req) {
            Err(e) => format!("error: cannot read the request: {e}\n"),
            Ok(_) if req.len() > MAX_REQUEST => format!("error: a request is {MAX_REQUEST} bytes at most\n"),
            Ok(_) => match String::from_utf8(req) {
                Err(_) => "error: the request is not UTF-8 text\n".to_string(),
                Ok(req) => match self.answer(control, &req) {
                    Ok(s) => s,
                    Err(e) => format!("error: {e}\n"),
                },
            },
        };
        self.served += 1;
        let _ = conn.write_all(answer.as_bytes());
    }
}

impl<D: DataPlane> Server<D> for ControlSocket<D> {
    fn name(&self) -> &'static str {
        "control socket"
    }

    fn start(&mut self, _control: &Control<D>) -> Result<String, String> {
        if let Some(dir) = self.paths[0].parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        for p in &self.paths {
            if p.exists() {
                if UnixStream::connect(p).is_ok() {
                    return Err(format!("{}: another instance serves this name", p.display()));
                }
                let _ = std::fs::remove_file(p);
            }
            let l = UnixListener::bind(p).map_err(|e| format!("cannot serve {}: {e}", p.display()))?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            self.listeners.push(l);
        }
        Ok(format!("sluice: control socket {}", self.paths[0].display()))
    }

    fn run(&mut self, control: &Control<D>, stop: &Stop) {
        let mut pfds: Vec<libc::pollfd> = self
            .listeners
            .iter()
            .map(|l| libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        while !stop.is_set() {
            // SAFETY: `pfds` is a live array of pollfd. A second's timeout: the stop is seen within it.
            let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 1000) };
            if r <= 0 {
                continue;
            }
            for i in 0..self.listeners.len() {
                while let Ok((conn, _)) = self.listeners[i].accept() {
                    self.serve(control, conn);
                }
            }
        }
    }

    fn finish(&mut self, _control: &Control<D>) -> Vec<String> {
        self.listeners.clear();
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
        Vec::new()
    }
}

/// A running instance, as its socket describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub pid: u32,
    pub kind: String,
    pub name: Option<String>,
    pub socket: PathBuf,
}

/// Sends `req` to the socket at `path` and returns the answer (an
/// `error: ` answer as the error).
pub fn ask(path: &Path, req: &str) -> Result<String, String> {
    let mut c = UnixStream::connect(path).map_err(|e| format!("cannot connect to {}: {e}", path.display()))?;
    let _ = c.set_read_timeout(Some(CLIENT_TIMEOUT * 6));
    c.write_all(req.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    c.shutdown(std::net::Shutdown::Write).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = String::new();
    c.read_to_string(&mut out).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(e) = out.strip_prefix("error: ") {
        return Err(e.trim_end().to_string());
    }
    Ok(out)
}

/// Every running instance (of `kind`, when given), by PID.
pub fn instances(kind: Option<&str>) -> Vec<Instance> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(run_dir()) else { return out };
    for e in dir.flatten() {
        let p = e.path();
        let Some(pid) = p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<u32>().ok()) else { continue };
        if p.extension().is_none_or(|x| x != "sock") {
            continue;
        }
        let Ok(info) = ask(&p, "info") else { continue };
        let field = |k: &str| {
            info.lines().find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(' '))).map(str::to_string)
        };
        let i = Instance {
            pid,
            kind: field("kind").unwrap_or_default(),
            name: field("name").filter(|n| n != "-"),
            socket: p,
        };
        if kind.is_none_or(|k| k == i.kind) {
            out.push(i);
        }
    }
    out.sort_by_key(|i| i.pid);
    out
}

/// The socket of instance `who` (a PID or a name), or of the only running
/// instance (of `kind`, when given) when `who` is `None`.
pub fn find(who: Option<&str>, kind: Option<&str>) -> Result<PathBuf, String> {
    let what = kind.unwrap_or("Sluice");
    if let Some(w) = who {
        let p = run_dir().join(format!("{w}.sock"));
        if !p.exists() {
            return Err(format!("no {what} instance {w:?} ({} does not exist)", p.display()));
        }
        return Ok(p);
    }
    let mut all = instances(kind);
    match all.len() {
        0 => Err(format!("no {what} instance is running")),
        1 => Ok(all.remove(0).socket),
        n => Err(format!("{n} {what} instances are running: name one (PID or name)")),
    }
}
