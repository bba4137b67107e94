//! pcap files as ports and as capture logs (classic libpcap format,
//! microseconds, Ethernet link type).
//!
//! - [`FilePort`]: bmv2's `--use-files`: a port whose input is
//!   `<iface>_in.pcap`, replayed in order, and whose output is appended to
//!   `<iface>_out.pcap`.
//! - [`PcapLog`]: a capture file written as packets pass (`--pcap`): each
//!   record goes to the file in one `write`, so that a reader sees every
//!   packet at once and a switch killed with SIGKILL leaves a readable file
//!   (at most its last record cut short). bmv2 flushes after every packet
//!   too.
//! - [`read_pcap`] / [`read_frames`] / [`write_pcap`]: whole files, for
//!   replays, `sluice lwaftr check` and tests.
//!
//! Reading uses the `pcap-file` crate (a maintained reader of the format,
//! with its checks of byte order and record lengths).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::PcapParser;

use crate::{Port, PortStats, RxBatch, VnetHdr, BATCH};

/// Largest record a capture holds whole (a 64 KB offloaded segment fits).
pub const SNAPLEN: u32 = 262_144;

/// Reads every packet of a pcap file as `(timestamp, bytes)`. An empty
/// file (not even a header) holds no packets.
pub fn read_pcap(path: &Path) -> Result<Vec<(Duration, Vec<u8>)>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    packets_of(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The packets of a pcap file's bytes as `(timestamp, bytes)`; empty bytes
/// hold no packets. (Parsed in place: `pcap-file`'s streaming reader would
/// first zero an 8 MB buffer.)
pub fn packets_of(bytes: &[u8]) -> Result<Vec<(Duration, Vec<u8>)>, String> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let (mut rest, parser) = PcapParser::new(bytes).map_err(|e| format!("not a pcap file: {e}"))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (after, p) = parser.next_packet(rest).map_err(|e| format!("bad pcap record: {e}"))?;
        out.push((p.timestamp, p.data.into_owned()));
        rest = after;
    }
    Ok(out)
}

/// The frames of a pcap file's bytes, without their timestamps; empty
/// bytes hold no frames.
pub fn frames_of(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    Ok(packets_of(bytes)?.into_iter().map(|(_, f)| f).collect())
}

/// The frames of a pcap file, without their timestamps (see [`read_pcap`]).
pub fn read_frames(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    Ok(read_pcap(path)?.into_iter().map(|(_, f)| f).collect())
}

/// Writes packets to a pcap file with synthetic timestamps (packet i at i µs).
pub fn write_pcap(path: &Path, packets: &[Vec<u8>]) -> Result<(), String> {
    let mut log = PcapLog::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    for (i, p) in packets.iter().enumerate() {
        log.write(Duration::from_micros(i as u64), p).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Writes frames the way Snabb's `lwaftr check` writes its outputs (snaplen
/// 65535, every timestamp 0), so that such files compare byte for byte.
pub fn write_untimed_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<(), String> {
    let mut log = PcapLog::with_snaplen(path, 65_535).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    for f in frames {
        log.write(Duration::ZERO, f).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The time since the Unix epoch, as capture records stamp it.
pub fn now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// A pcap file written one record at a time, each in a single `write`.
#[derive(Debug)]
pub struct PcapLog {
    file: File,
    snaplen: u32,
    path: PathBuf,
    record: Vec<u8>,
}

impl PcapLog {
    /// Creates (or truncates) `path` and writes the file header.
    pub fn create(path: &Path) -> io::Result<PcapLog> {
        PcapLog::with_snaplen(path, SNAPLEN)
    }

    /// [`PcapLog::create`] with records cut to `snaplen` bytes.
    pub fn with_snaplen(path: &Path, snaplen: u32) -> io::Result<PcapLog> {
        let mut file = File::create(path)?;
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic: microseconds, little endian
        h.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // GMT offset
        h.extend_from_slice(&0u32.to_le_bytes()); // timestamp accuracy
        h.extend_from_slice(&snaplen.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
        file.write_all(&h)?;
        Ok(PcapLog { file, snaplen, path: path.to_path_buf(), record: Vec::with_capacity(2048) })
    }

    /// Where the log is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one frame (cut to the snaplen, [`SNAPLEN`] unless created
    /// otherwise, its original length kept).
    pub fn write(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        let kept = &frame[..frame.len().min(self.snaplen as usize)];
        self.record.clear();
        self.record.extend_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        self.record.extend_from_slice(&ts.subsec_micros().to_le_bytes());
        self.record.extend_from_slice(&(kept.len() as u32).to_le_bytes());
        self.record.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.record.extend_from_slice(kept);
        self.file.write_all(&self.record)
    }
}

/// A port made of two pcap files (bmv2's `--use-files`): the input file is
/// read at start and replayed in order, sent frames are appended to the
/// output file as they are sent.
pub struct FilePort {
    name: String,
    input: Vec<Vec<u8>>,
    next: usize,
    /// Polled for readability (a regular file always is) until the input ends.
    file: File,
    out: PcapLog,
    stats: PortStats,
}

impl FilePort {
    /// Opens `<iface>_in.pcap` (read whole) and creates `<iface>_out.pcap`
    /// in the working directory.
    pub fn open(iface: &str) -> Result<FilePort, String> {
        let in_path = PathBuf::from(format!("{iface}_in.pcap"));
        let input: Vec<Vec<u8>> = read_pcap(&in_path)?.into_iter().map(|(_, d)| d).collect();
        let file = File::open(&in_path).map_err(|e| format!("cannot open {}: {e}", in_path.display()))?;
        let out_path = PathBuf::from(format!("{iface}_out.pcap"));
        let out = PcapLog::create(&out_path).map_err(|e| format!("cannot create {}: {e}", out_path.display()))?;
        Ok(FilePort { name: iface.to_string(), input, next: 0, file, out, stats: PortStats::default() })
    }
}

impl Port for FilePort {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "pcap files"
    }

    fn offload(&self) -> bool {
        false
    }

    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let end = (self.next + BATCH).min(self.input.len());
        let frames: Vec<&[u8]> = self.input[self.next..end].iter().map(Vec::as_slice).collect();
        let n = batch.fill_from(&frames);
        for f in &frames[..n] {
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += f.len() as u64;
        }
        self.next += n;
        Ok(n)
    }

    fn send(&mut self, frame: &[u8], _vnet: &VnetHdr) -> io::Result<()> {
        self.out.write(now(), frame)?;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn finished(&self) -> bool {
        self.next >= self.input.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_readable_after_every_record_and_keeps_long_frames_whole() {
        let dir = std::env::temp_dir().join(format!("sluice-pcaplog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcap");
        let mut log = PcapLog::create(&path).unwrap();
        assert!(read_pcap(&path).unwrap().is_empty(), "the header alone is a valid file");
        let big = vec![0xabu8; 65_600];
        log.write(Duration::from_micros(1_500_001), &[1, 2, 3]).unwrap();
        // Read while the log is still open: nothing waits in a buffer.
        let got = read_pcap(&path).unwrap();
        assert_eq!(got, vec![(Duration::from_micros(1_500_001), vec![1, 2, 3])]);
        log.write(Duration::from_micros(2), &big).unwrap();
        let got = read_pcap(&path).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].1, big);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
