//! The `simple_switch` service: mirroring sessions, egress queues and the
//! clock; and bmv2 `psa_switch`'s service of the same kind (`psa_switch`:
//! mirroring mappings, egress queues, pass bounds, the clock).

use sluice_control::device::Device;
use sluice_engine::runtime::MirrorSession;

use crate::wire::{st, Fields, Val};
use crate::{Answer, Fault};

/// Runs one call of the `simple_switch` service.
pub fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let mut pool = dev.pool();
    match method {
        "mirroring_session_add" => {
            let id = a.i32(1, "mirror_id")? as u32;
            let cfg = a.st(2, "config")?;
            let session = MirrorSession {
                port: cfg.opt_i32(1).map(|p| p as u32),
                mgid: cfg.opt_i32(2).map(|g| g as u32),
                ..Default::default()
            };
            pool.commit(move |sw, _| sw.mirror_set(id, session.clone()));
            Ok(None)
        }
        "mirroring_mapping_add" => {
            let id = a.i32(1, "mirror_id")? as u32;
            let port = a.i32(2, "egress_port")? as u32;
            pool.commit(move |sw, _| sw.mirror_set(id, MirrorSession { port: Some(port), ..Default::default() }));
            Ok(Some(Val::I32(0)))
        }
        "mirroring_session_delete" | "mirroring_mapping_delete" => {
            let id = a.i32(1, "mirror_id")? as u32;
            let r = pool.apply(move |sw, _| sw.mirror_delete(id));
            match (r, method) {
                (Ok(()), "mirroring_session_delete") => Ok(None),
                (Err(_), "mirroring_session_delete") => Err(Fault::Code(1)), // SESSION_NOT_FOUND
                (r, _) => Ok(Some(Val::I32(if r.is_ok() { 0 } else { 1 }))),
            }
        }
        "mirroring_session_get" => {
            let id = a.i32(1, "mirror_id")? as u32;
            let s = pool.view().mirror_session(id).cloned().ok_or(Fault::Code(1))?;
            let mut f = Vec::new();
            if let Some(p) = s.port {
                f.push((1, Val::I32(p as i32)));
            }
            if let Some(g) = s.mgid {
                f.push((2, Val::I32(g as i32)));
            }
            Ok(Some(st(f)))
        }
        "mirroring_mapping_get_egress_port" => {
            let id = a.i32(1, "mirror_id")? as u32;
            let port = pool.view().mirror_session(id).and_then(|s| s.port).map_or(-1, |p| p as i32);
            Ok(Some(Val::I32(port)))
        }
        // The egress queues (the engine's traffic manager): status 0 when
        // set, 1 for a port or priority out of range.
        "set_egress_queue_depth" | "set_all_egress_queue_depths" | "set_egress_priority_queue_depth" => {
            let Some((port, priority, at)) = queue_of(method, a)? else { return Ok(Some(Val::I32(1))) };
            let depth = a.i32(at, "depth_pkts")?.max(1) as usize;
            let ok = pool.apply(move |sw, _| if sw.set_queue_depth(port, priority, depth) { Ok(()) } else { Err(()) });
            Ok(Some(Val::I32(if ok.is_ok() { 0 } else { 1 })))
        }
        "set_egress_queue_rate" | "set_all_egress_queue_rates" | "set_egress_priority_queue_rate" => {
            let Some((port, priority, at)) = queue_of(method, a)? else { return Ok(Some(Val::I32(1))) };
            let rate = a.i64(at, "rate_pps")?.max(0) as u64;
            let ok = pool.apply(move |sw, _| if sw.set_queue_rate(port, priority, rate) { Ok(()) } else { Err(()) });
            Ok(Some(Val::I32(if ok.is_ok() { 0 } else { 1 })))
        }
        "get_time_elapsed_us" => Ok(Some(Val::I64(dev.started.elapsed().as_micros() as i64))),
        "get_time_since_epoch_us" => Ok(Some(Val::I64(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64),
        ))),
        _ => Err(Fault::Unknown(format!("simple_switch:{method} is not a method of the simple_switch service"))),
    }
}

/// The queue a queue call names and the field id of its value: `set_all_*`
/// names every queue (value 1), `set_egress_queue_*` a port's (value 2),
/// `set_egress_priority_queue_*` one priority of a port (value 3). `None`
/// for a negative port or priority (out of range).
#[allow(clippy::type_complexity)]
fn queue_of(method: &str, a: &Fields) -> Result<Option<(Option<u32>, Option<usize>, i16)>, Fault> {
    let (port, priority, at) = if method.starts_with("set_all_") {
        (None, None, 1)
    } else if method.starts_with("set_egress_priority_queue_") {
        (Some(a.i32(1, "port_num")?), Some(a.i32(2, "priority")?), 3)
    } else {
        (Some(a.i32(1, "port_num")?), None, 2)
    };
    let (Ok(port), Ok(priority)) = (port.map(u32::try_from).transpose(), priority.map(usize::try_from).transpose())
    else {
        return Ok(None);
    };
    Ok(Some((port, priority, at)))
}

/// Runs one call of the `psa_switch` service (bmv2's `psa_switch.thrift`).
/// Sluice bounds resubmissions and recirculations together, by one number
/// of passes per input: setting either bound sets it, reading either reads it.
pub fn call_psa(dev: &Device, method: &str, a: &Fields) -> Answer {
    match method {
        "mirroring_mapping_add"
        | "mirroring_mapping_delete"
        | "mirroring_mapping_get_egress_port"
        | "set_egress_queue_depth"
        | "set_all_egress_queue_depths"
        | "set_egress_queue_rate"
        | "set_all_egress_queue_rates"
        | "get_time_elapsed_us"
        | "get_time_since_epoch_us" => call(dev, method, a),
        "set_max_recirculations" | "set_max_resubmissions" => {
            let v = a.i32(1, "value")?.max(0) as u32;
            let mut pool = dev.pool();
            pool.commit(move |sw, _| sw.max_recirculations = v);
            Ok(None)
        }
        "get_max_recirculations" | "get_max_resubmissions" => {
            let v = dev.pool().view().max_recirculations;
            Ok(Some(Val::I8(v.min(i8::MAX as u32) as i8)))
        }
        _ => Err(Fault::Unknown(format!("psa_switch:{method} is not a method of the psa_switch service"))),
    }
}
