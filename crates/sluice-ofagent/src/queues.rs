//! Port queues as controllers read them: their configuration
//! (QUEUE_GET_CONFIG, 1.0 and 1.3), their descriptions (QUEUE_DESC, 1.4)
//! and their statistics (queue stats, every version).
//!
//! Contract: reads the master copy's queue settings, the ports' link
//! speeds and every worker's queue counts summed (`merge_counters`);
//! writes nothing. Rates are reported as OpenFlow has them, in tenths of
//! a percent of the port's current speed (a configured rate too small to
//! show as 1 is reported as 1; 0xffff, "not configured", when the speed
//! is unknown or the rate is not set). A request for a port the switch
//! does not have gets QUEUE_OP_FAILED/BAD_PORT, for a queue the port does
//! not have QUEUE_OP_FAILED/BAD_QUEUE (OFPP_ANY, 1.0's OFPP_ALL, and
//! OFPQ_ALL select all).

use sluice_ofswitch::switch::QueueConfig;
use sluice_openflow::errors::{error_type, queue_op_failed};
use sluice_openflow::{port, OfError, PacketQueue, QueueDesc, QueueProp, QueueStats};

use crate::agent::Agent;

/// `OFPQ_ALL`: every queue.
pub const QUEUE_ALL: u32 = 0xffff_ffff;

/// A rate property's value: "not configured".
const RATE_UNSET: u16 = 0xffff;

/// `bps` in tenths of a percent of a link of `speed_kbps`.
fn per_mille(bps: Option<u64>, speed_kbps: u32) -> u16 {
    match bps {
        Some(bps) if speed_kbps > 0 => {
            let v = (bps as f64 / f64::from(speed_kbps)).round();
            v.clamp(1.0, 1000.0) as u16
        }
        _ => RATE_UNSET,
    }
}

impl Agent {
    /// The queues `port_no` and `queue_id` select, each with its port's
    /// speed in kbit/s.
    fn selected_queues(&mut self, port_no: u32, queue_id: u32) -> Result<Vec<(QueueConfig, u32)>, OfError> {
        // OpenFlow 1.0 says "every port" with OFPP_ALL.
        let port_no = if port_no == port::ALL { port::ANY } else { port_no };
        let pool = self.pool();
        let sw = pool.view();
        if port_no != port::ANY && sw.port(port_no).is_none() {
            return Err(OfError::new(
                error_type::QUEUE_OP_FAILED,
                queue_op_failed::BAD_PORT,
                format!("port {port_no}"),
            ));
        }
        let configs = sw.queues().map(|q| q.configs().to_vec()).unwrap_or_default();
        let chosen: Vec<(QueueConfig, u32)> = configs
            .into_iter()
            .filter(|c| {
                (port_no == port::ANY || c.port == port_no) && (queue_id == QUEUE_ALL || c.queue_id == queue_id)
            })
            .map(|c| {
                let name = sw.port(c.port).map(|p| p.name.clone()).unwrap_or_default();
                let (_, speed) = sluice_ofswitch::features::link_features(sluice_ports::link_speed(&name));
                (c, speed)
            })
            .collect();
        if queue_id != QUEUE_ALL && chosen.is_empty() {
            return Err(OfError::new(
                error_type::QUEUE_OP_FAILED,
                queue_op_failed::BAD_QUEUE,
                format!("queue {queue_id} of port {port_no:#x}"),
            ));
        }
        Ok(chosen)
    }

    /// QUEUE_GET_CONFIG's answer for `port_no` (OFPP_ANY: every port).
    pub(crate) fn packet_queues(&mut self, port_no: u32) -> Result<Vec<PacketQueue>, OfError> {
        Ok(self
            .selected_queues(port_no, QUEUE_ALL)?
            .into_iter()
            .map(|(c, speed)| PacketQueue { queue_id: c.queue_id, port: c.port, properties: properties(&c, speed) })
            .collect())
    }

    /// QUEUE_DESC's answer (OpenFlow 1.4).
    pub(crate) fn queue_descs(&mut self, port_no: u32, queue_id: u32) -> Result<Vec<QueueDesc>, OfError> {
        Ok(self
            .selected_queues(port_no, queue_id)?
            .into_iter()
            .map(|(c, speed)| QueueDesc { port_no: c.port, queue_id: c.queue_id, properties: properties(&c, speed) })
            .collect())
    }

    /// Queue statistics, every worker's counts summed.
    pub(crate) fn queue_stats(&mut self, port_no: u32, queue_id: u32) -> Result<Vec<QueueStats>, OfError> {
        let chosen = self.selected_queues(port_no, queue_id)?;
        self.pool().merge_counters();
        let pool = self.pool();
        let sw = pool.view();
        let age = sw.queues().map(|q| q.since.elapsed()).unwrap_or_default();
        Ok(chosen
            .into_iter()
            .map(|(c, _)| {
                let n = sw.counts().queues.get(&(c.port, c.queue_id)).copied().unwrap_or_default();
                QueueStats {
                    port_no: c.port,
                    queue_id: c.queue_id,
                    tx_bytes: n.tx_bytes,
                    tx_packets: n.tx_packets,
                    tx_errors: n.tx_errors,
                    duration_sec: age.as_secs() as u32,
                    duration_nsec: age.subsec_nanos(),
                }
            })
            .collect())
    }
}

/// A queue's minimum and maximum rate properties on a link of `speed` kbit/s.
fn properties(c: &QueueConfig, speed: u32) -> Vec<QueueProp> {
    vec![QueueProp::MinRate(per_mille(c.min_rate, speed)), QueueProp::MaxRate(per_mille(c.max_rate, speed))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_tenths_of_a_percent_of_the_link() {
        // 10 Gbit/s links report 10 000 000 kbit/s.
        assert_eq!(per_mille(Some(5_000_000_000), 10_000_000), 500);
        assert_eq!(per_mille(Some(2_000_000), 10_000_000), 1, "too small to show: 1");
        assert_eq!(per_mille(Some(20_000_000_000), 10_000_000), 1000);
        assert_eq!(per_mille(None, 10_000_000), RATE_UNSET);
        assert_eq!(per_mille(Some(1_000_000), 0), RATE_UNSET, "unknown speed");
    }
}
