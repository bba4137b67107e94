//! The rest of the `standard` service: parser value sets, the learning
//! calls (accepted, no effect), the program swap, ports, management
//! information, CRC parameters, reset, the loaded program and ids by name.

use sluice_control::device::Device;

use super::*;

/// Runs one call of this group (see the module documentation).
pub(super) fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let mut pool = dev.pool();
    let sw = pool.view();
    match method {
        // ---- parser value sets
        "bm_parse_vset_add" | "bm_parse_vset_remove" | "bm_parse_vset_get" | "bm_parse_vset_clear" => {
            let v = sw.index_of(Resource::ValueSet, a.str(2, "parse_vset_name")?).ok_or(Fault::Code(1))?;
            let pc = |_: RtError| Fault::Code(2);
            match method {
                "bm_parse_vset_add" => {
                    let val = a.bin(3, "value")?.to_vec();
                    pool.try_change(move |sw, _| sw.vset_add(v, &val, None)).map_err(pc)?;
                }
                "bm_parse_vset_remove" => {
                    let val = a.bin(3, "value")?.to_vec();
                    pool.try_change(move |sw, _| sw.vset_remove(v, &val)).map_err(pc)?;
                }
                "bm_parse_vset_clear" => {
                    pool.change(move |sw, _| sw.vset_clear(v));
                }
                _ => return Ok(Some(bin_list(sw.vset_values(v).iter().map(|(x, _)| x.clone()).collect()))),
            }
            pool.flush();
            Ok(None)
        }

        // ---- learning (`--notifications-addr`): without the learning engine
        // (simple_switch_grpc sends digests to P4Runtime) these have no effect.
        "bm_learning_ack" | "bm_learning_ack_buffer" | "bm_learning_set_timeout" | "bm_learning_set_buffer_size" => {
            let Some(learning) = dev.learning() else { return Ok(None) };
            let list = a.i32(2, "list_id")?;
            let r = match method {
                "bm_learning_ack_buffer" => learning.ack_buffer(list, a.i64(3, "buffer_id")? as u64),
                "bm_learning_ack" => {
                    let ids: Vec<i32> = a
                        .list(4, "sample_ids")?
                        .iter()
                        .map(|v| match v {
                            Val::I32(i) => *i,
                            _ => -1,
                        })
                        .collect();
                    learning.ack(list, a.i64(3, "buffer_id")? as u64, &ids)
                }
                "bm_learning_set_timeout" => learning.set_timeout(list, a.i32(3, "timeout_ms")?.max(0) as u32),
                _ => learning.set_buffer_size(list, a.i32(3, "nb_samples")?.max(1) as u32),
            };
            r.map(|_| None).map_err(|e| Fault::Code(e as i32))
        }

        // ---- program swap, ports, management
        "bm_load_new_config" => {
            let json = a.str(1, "config_str")?.to_string();
            drop(pool);
            if dev.check_swap(&json).is_err() {
                return Err(Fault::Code(1)); // CONFIG_SWAP_DISABLED
            }
            dev.stage(&json).map_err(|e| Fault::Internal(format!("the new program cannot be loaded: {e}")))?;
            Ok(None)
        }
        "bm_swap_configs" => {
            drop(pool);
            if dev.check_swap_staged().is_err() {
                return Err(Fault::Code(1)); // CONFIG_SWAP_DISABLED
            }
            match dev.swap_staged() {
                Ok(true) => Ok(None),
                Ok(false) => Err(Fault::Code(3)), // NO_ONGOING_SWAP
                Err(e) => Err(Fault::Internal(e)),
            }
        }
        "bm_dev_mgr_add_port" => {
            let iface = a.str(1, "iface_name")?.to_string();
            let port = a.i32(2, "port_num")?;
            drop(pool);
            if !(0..511).contains(&port) {
                return Err(Fault::Code(1));
            }
            dev.add_port(port as u32, &iface).map_err(|e| {
                eprintln!("sluice: port_add {iface} {port}: {e}");
                Fault::Code(1)
            })?;
            Ok(None)
        }
        "bm_dev_mgr_remove_port" => {
            let port = a.i32(1, "port_num")?;
            drop(pool);
            dev.remove_port(port.max(0) as u32).map_err(|e| {
                eprintln!("sluice: port_remove {port}: {e}");
                Fault::Code(1)
            })?;
            Ok(None)
        }
        "bm_dev_mgr_show_ports" => Ok(Some(st_list(
            dev.ports()
                .iter()
                .map(|p| {
                    st(vec![
                        (1, Val::I32(p.number as i32)),
                        (2, s(p.iface.clone())),
                        (3, Val::Bool(dev.info.link_up.is_none_or(|up| up(&p.iface)))),
                        (4, Val::Map(TType::String, TType::String, Vec::new())),
                    ])
                })
                .collect(),
        ))),
        "bm_mgmt_get_info" => Ok(Some(st(vec![
            (1, Val::I64(dev.info.device_id as i64)),
            (2, Val::I32(dev.info.thrift_port.map_or(0, i32::from))),
            (3, s(dev.notifications_address())),
        ]))),
        "bm_set_crc16_custom_parameters" | "bm_set_crc32_custom_parameters" => {
            let name = a.str(2, "calc_name")?;
            let c = sw.program().calcs.iter().position(|c| c.name == name).ok_or(Fault::Code(1))?;
            let width = if method.contains("crc16") { 16 } else { 32 };
            let cfg = a.st(3, "config")?;
            let num = |id: i16, what: &str| -> Result<u64, BadMessage> {
                if width == 16 {
                    Ok(u64::from(cfg.i16(id, what)? as u16))
                } else {
                    Ok(u64::from(cfg.i32(id, what)? as u32))
                }
            };
            let params = CrcParams {
                width,
                polynomial: num(1, "polynomial")?,
                initial_remainder: num(2, "initial_remainder")?,
                final_xor_value: num(3, "final_xor_value")?,
                data_reflected: cfg.bool(4, "data_reflected")?,
                remainder_reflected: cfg.bool(5, "remainder_reflected")?,
            };
            // Refused parameters change nothing, and go to no worker.
            pool.apply(move |sw, _| sw.set_crc_params(c, params)).map_err(|e| match e {
                ConfigError::WrongTypeCalculation => Fault::Code(2),
                _ => Fault::Code(3), // INVALID_CONFIG
            })?;
            Ok(None)
        }
        "bm_reset_state" => {
            // In place: every worker takes a copy of one state as loaded,
            // so they share its registers and meters as replicas do.
            let loaded = std::sync::Arc::new(sw.loaded_state().map_err(|e| Fault::Internal(e.to_string()))?);
            pool.commit(move |sw, _| sw.restore_state(&loaded));
            Ok(None)
        }
        "bm_get_config" => Ok(Some(s(dev.program().json.to_string()))),
        "bm_get_config_md5" => Ok(Some(Val::Bin(Md5::digest(dev.program().json.as_bytes()).to_vec()))),
        "bm_get_id_from_name" => {
            let ty = a.i32(2, "resource_type")?;
            let name = a.str(3, "resource_name")?;
            let p = sw.program();
            let id = match ty {
                0 => p.tables.iter().find(|x| x.name == name).map(|x| x.id as i32),
                1 => p.profiles.iter().position(|x| x.name == name).map(|i| i as i32),
                2 => p.counters.iter().position(|x| x.name == name).map(|i| i as i32),
                3 => p.meters.iter().position(|x| x.name == name).map(|i| i as i32),
                4 => p.registers.iter().position(|x| x.name == name).map(|i| i as i32),
                5 => p.learn_lists.iter().find(|(_, (n, _))| n == name).map(|(id, _)| *id as i32),
                _ => return Err(Fault::Code(0)), // INVALID_RESOURCE_TYPE
            };
            id.map(|i| Some(Val::I32(i))).ok_or(Fault::Code(1))
        }
        "bm_serialize_state" => {
            let md5 = sluice_control::cli::state::config_md5(&dev.program().json);
            Ok(Some(s(sluice_control::cli::state::serialize(sw, &md5))))
        }
        _ => Err(Fault::Unknown(format!("standard:{method} is not a method of the standard service"))),
    }
}
