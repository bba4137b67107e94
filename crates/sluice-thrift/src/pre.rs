//! The `simple_pre_lag` service: multicast groups, nodes and LAGs.

use sluice_control::device::Device;
use sluice_engine::runtime::{RtCode, RtError};

use crate::wire::{s, Fields, Val};
use crate::{bits_of_map, code, Answer, Fault};

/// bmv2's McOperationErrorCode for a runtime error.
pub fn mc_code(e: &RtError) -> i32 {
    match e.code {
        RtCode::InvalidMgid => 2,
        RtCode::InvalidL1Handle => 4,
        _ => 5, // ERROR
    }
}

/// Runs one call of the `simple_pre_lag` service.
pub fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let mc = code(mc_code);
    let mut pool = dev.pool();
    match method {
        "bm_mc_mgrp_create" => {
            let g = a.i32(2, "mgrp")?;
            if g < 0 {
                return Err(Fault::Code(2));
            }
            pool.commit(move |sw, _| sw.mc_group_create(g as u32));
            Ok(Some(Val::I32(g)))
        }
        "bm_mc_mgrp_destroy" => {
            let g = a.i32(2, "mgrp_handle")? as u32;
            // Destroying a group that does not exist succeeds, as in bmv2.
            pool.commit(move |sw, _| {
                let _ = sw.mc_group_destroy(g);
            });
            Ok(None)
        }
        "bm_mc_node_create" => {
            let rid = a.i32(2, "rid")?;
            if !(0..=0xffff).contains(&rid) {
                return Err(Fault::Code(5));
            }
            let ports = bits_of_map(a.bin(3, "port_map")?)?;
            let lags = bits_of_map(a.bin(4, "lag_map")?)?;
            let h = pool.commit(move |sw, _| sw.mc_node_create(rid as u16, ports.clone(), lags.clone()));
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mc_node_update" => {
            let h = a.i32(2, "l1_handle")? as u32;
            let ports = bits_of_map(a.bin(3, "port_map")?)?;
            let lags = bits_of_map(a.bin(4, "lag_map")?)?;
            pool.apply(move |sw, _| sw.mc_node_update(h, ports.clone(), lags.clone())).map_err(mc)?;
            Ok(None)
        }
        "bm_mc_node_associate" | "bm_mc_node_dissociate" => {
            let g = a.i32(2, "mgrp_handle")? as u32;
            let h = a.i32(3, "l1_handle")? as u32;
            let associate = method == "bm_mc_node_associate";
            pool.apply(move |sw, _| sw.mc_node_associate(g, h, associate)).map_err(|e| {
                // bmv2 names a missing group by its handle here.
                if e.code == RtCode::InvalidMgid {
                    Fault::Code(3)
                } else {
                    Fault::Code(mc_code(&e))
                }
            })?;
            Ok(None)
        }
        "bm_mc_node_destroy" => {
            let h = a.i32(2, "l1_handle")? as u32;
            pool.apply(move |sw, _| sw.mc_node_destroy(h)).map_err(mc)?;
            Ok(None)
        }
        "bm_mc_set_lag_membership" => {
            // A negative index is one bmv2 reads as above its largest (unsigned).
            let lag = u32::try_from(a.i16(2, "lag_index")?).map_err(|_| Fault::Code(5))?;
            let ports = bits_of_map(a.bin(3, "port_map")?)?;
            pool.apply(move |sw, _| sw.mc_lag_set_membership(lag, ports.clone())).map_err(mc)?;
            Ok(None)
        }
        "bm_mc_get_entries" => Ok(Some(s(mc_json(pool.view())))),
        _ => Err(Fault::Unknown(format!("simple_pre_lag:{method} is not a method of the simple_pre_lag service"))),
    }
}

/// The replication engine as the JSON `mc_dump` prints.
fn mc_json(sw: &sluice_engine::Switch) -> String {
    use serde_json::json;
    let mgrps: Vec<_> = sw.mc_groups().map(|(g, nodes)| json!({"id": g, "l1_handles": nodes})).collect();
    let mut l1 = Vec::new();
    let mut l2 = Vec::new();
    for (h, n) in sw.mc_nodes() {
        l1.push(json!({"handle": h, "rid": n.rid, "l2_handle": h}));
        l2.push(json!({"handle": h, "ports": n.ports, "lags": n.lags}));
    }
    let lags: Vec<_> = sw.mc_lags().map(|(id, ports)| json!({"id": id, "ports": ports})).collect();
    json!({"mgrps": mgrps, "l1_handles": l1, "l2_handles": l2, "lags": lags}).to_string()
}
