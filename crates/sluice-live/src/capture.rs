//! `--pcap DIR`: every frame a port receives and sends, written to
//! `DIR/<iface>_in.pcap` and `DIR/<iface>_out.pcap` (bmv2's names) as it
//! passes, one `write` per record (see `sluice_ports::pcapfile::PcapLog`).
//!
//! Concurrency invariant: the files of all ports sit behind one mutex that
//! workers take per record, so records of one file never interleave; a
//! capture is a debugging aid, not a fast path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sluice_ports::pcapfile::{now, PcapLog};

use crate::PortSpec;

/// Which file of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
}

/// The capture files of every port, by port number.
pub struct Captures {
    dir: PathBuf,
    files: Mutex<BTreeMap<u32, [PcapLog; 2]>>,
}

impl Captures {
    /// Creates `dir` and the two files of each port.
    pub fn create(dir: &Path, ports: &[PortSpec]) -> Result<Captures, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let c = Captures { dir: dir.to_path_buf(), files: Mutex::new(BTreeMap::new()) };
        for p in ports {
            c.add(p.port, &p.iface)?;
        }
        Ok(c)
    }

    /// Creates the files of a port (one added at run time, too: the first
    /// worker to attach it creates them, the others find them).
    pub fn add(&self, port: u32, iface: &str) -> Result<(), String> {
        if self.files.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&port) {
            return Ok(());
        }
        let open = |suffix: &str| {
            let path = self.dir.join(format!("{iface}_{suffix}.pcap"));
            PcapLog::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))
        };
        let files = [open("in")?, open("out")?];
        self.files.lock().unwrap_or_else(|e| e.into_inner()).insert(port, files);
        Ok(())
    }

    /// Records a frame of port `port`; a port without files is skipped.
    /// A failed write is reported once per file and the capture goes on.
    pub fn record(&self, port: u32, dir: Direction, frame: &[u8]) {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = files.get_mut(&port) else { return };
        let log = &mut f[dir as usize];
        if let Err(e) = log.write(now(), frame) {
            crate::log::report(format!("sluice: writing {} failed: {e}; this capture stops", log.path().display()));
            files.remove(&port);
        }
    }
}
