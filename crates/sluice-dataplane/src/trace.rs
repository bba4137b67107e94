//! Where a data plane's per-packet trace goes: log lines at a level (bmv2's
//! per-packet log) and event messages (bmv2's event stream). The data plane
//! keeps the trace while tracing is on ([`crate::DataPlane::set_tracing`])
//! and hands it to a [`TraceOut`] after each batch
//! ([`crate::DataPlane::drain_trace`]); the driver decides, batch by batch,
//! whether anybody wants it (a log at debug level or finer, a subscriber to
//! the event stream), so that a switch nobody watches runs untraced.

/// A log line's level, as bmv2 names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    /// bmv2's `--log-level` names: trace, debug, info, warn, error; `off`
    /// is no level (`None`). Anything else is refused with bmv2's wording.
    pub fn parse(s: &str) -> Result<Option<Level>, String> {
        Ok(Some(match s {
            "trace" => Level::Trace,
            "debug" => Level::Debug,
            "info" => Level::Info,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "off" => return Ok(None),
            other => return Err(format!("Invalid value {other} for --log-level")),
        }))
    }

    /// The letter bmv2's logger prints for the level (`[D]`).
    pub fn letter(self) -> char {
        match self {
            Level::Trace => 'T',
            Level::Debug => 'D',
            Level::Info => 'I',
            Level::Warn => 'W',
            Level::Error => 'E',
        }
    }
}

/// What receives a drained trace.
pub trait TraceOut {
    /// The least level of log lines wanted (`None`: none).
    fn log_level(&self) -> Option<Level>;
    /// One log line (it may hold newlines: a key dump is one line).
    fn log(&mut self, level: Level, line: &str);
    /// The device id to stamp event messages with, when they are wanted.
    fn events(&self) -> Option<u64>;
    /// One event message.
    fn event(&mut self, message: &[u8]);
}
