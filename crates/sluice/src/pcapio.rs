//! pcap file input and output (classic libpcap format, Ethernet link type).

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};

/// Reads every packet of a pcap file as `(timestamp, bytes)`.
pub fn read_pcap(path: &Path) -> Result<Vec<(Duration, Vec<u8>)>, String> {
    let f = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut r = PcapReader::new(f).map_err(|e| format!("{}: not a pcap file: {e}", path.display()))?;
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.map_err(|e| format!("{}: bad pcap record: {e}", path.display()))?;
        out.push((p.timestamp, p.data.into_owned()));
    }
    Ok(out)
}

/// Writes packets to a pcap file with synthetic timestamps.
pub fn write_pcap(path: &Path, packets: &[Vec<u8>]) -> Result<(), String> {
    let f = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut w = PcapWriter::new(BufWriter::new(f)).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, p) in packets.iter().enumerate() {
        let ts = Duration::from_micros(i as u64);
        w.write_packet(&PcapPacket::new(ts, p.len() as u32, p)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
