//! The `standard` service's counter, meter and register calls: a table's
//! direct counters and meters, and the counter, meter and register arrays.
//! Counter writes keep their value on one replica (reads sum them); meter
//! rates and registers are shared state, changed once through the master.

use sluice_control::device::Device;

use super::*;

/// Runs one call of this group (see the module documentation).
pub(super) fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let tc = code(table_code);
    let mut pool = dev.pool();
    let sw = pool.view();
    match method {
        // ---- direct counters and meters
        "bm_mt_read_counter" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            if !sw.program().tables[t].with_counters {
                return Err(Fault::Code(4)); // COUNTERS_DISABLED
            }
            pool.read(|sw| sw.entry_counter_read(t, h).map(|(p, b)| counter_value(p, b)))
                .map(Some)
                .map_err(|_| Fault::Code(2))
        }
        "bm_mt_reset_counters" => {
            let t = table(sw, a, 2)?;
            if !sw.program().tables[t].with_counters {
                return Err(Fault::Code(4));
            }
            pool.commit(move |sw, _| sw.entry_counters_reset(t));
            Ok(None)
        }
        "bm_mt_write_counter" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let v = a.st(4, "value")?;
            let (bytes, packets) = (v.i64(1, "bytes")? as u64, v.i64(2, "packets")? as u64);
            if !sw.program().tables[t].with_counters {
                return Err(Fault::Code(4));
            }
            pool.apply(move |sw, first| sw.entry_counter_write(t, h, if first { (packets, bytes) } else { (0, 0) }))
                .map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_set_meter_rates" => {
            let t = table(sw, a, 2)?;
            let (m, cell) = direct_meter(sw, t, handle(a, 3, "entry_handle")?)?;
            let r = rates(a.list(4, "rates")?)?;
            pool.change_shared(|sw| sw.set_meter_rates(m, cell, r)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_get_meter_rates" => {
            let t = table(sw, a, 2)?;
            let (m, cell) = direct_meter(sw, t, handle(a, 3, "entry_handle")?)?;
            Ok(Some(rates_val(&sw.meter_rates(m, cell).map_err(&tc)?)))
        }

        // ---- counter, meter and register arrays
        "bm_counter_read" | "bm_counter_reset_all" | "bm_counter_write" => {
            let c = sw.index_of(Resource::Counter, a.str(2, "counter_name")?).ok_or(Fault::Code(1))?;
            let cc = code(|e| array_code(e, 3));
            match method {
                "bm_counter_read" => {
                    let i = a.i32(3, "index")?.max(-1) as usize;
                    let v = pool.read(|sw| sw.counter_read(c, i)).map_err(|_| Fault::Code(2))?;
                    Ok(Some(counter_value(v.0, v.1)))
                }
                "bm_counter_reset_all" => {
                    pool.commit(move |sw, _| sw.counter_reset(c));
                    Ok(None)
                }
                _ => {
                    let i = a.i32(3, "index")?.max(-1) as usize;
                    let v = a.st(4, "value")?;
                    let (bytes, packets) = (v.i64(1, "bytes")? as u64, v.i64(2, "packets")? as u64);
                    pool.apply(move |sw, first| sw.counter_write(c, i, if first { (packets, bytes) } else { (0, 0) }))
                        .map_err(cc)?;
                    Ok(None)
                }
            }
        }
        "bm_meter_array_set_rates" | "bm_meter_set_rates" | "bm_meter_get_rates" => {
            let m = sw.index_of(Resource::Meter, a.str(2, "meter_array_name")?).ok_or(Fault::Code(1))?;
            let mc = code(|e| array_code(e, 6));
            match method {
                "bm_meter_array_set_rates" => {
                    let r = rates(a.list(3, "rates")?)?;
                    pool.change_shared(|sw| (0..sw.meter_len(m)).try_for_each(|i| sw.set_meter_rates(m, i, r.clone())))
                        .map_err(mc)?;
                    Ok(None)
                }
                "bm_meter_set_rates" => {
                    let i = sw.meter_index(m, a.i32(3, "index")? as u32).map_err(&mc)?;
                    let r = rates(a.list(4, "rates")?)?;
                    pool.change_shared(|sw| sw.set_meter_rates(m, i, r)).map_err(mc)?;
                    Ok(None)
                }
                _ => {
                    let i = sw.meter_index(m, a.i32(3, "index")? as u32).map_err(&mc)?;
                    Ok(Some(rates_val(&sw.meter_rates(m, i).map_err(mc)?)))
                }
            }
        }
        "bm_register_read"
        | "bm_register_read_all"
        | "bm_register_write"
        | "bm_register_write_range"
        | "bm_register_reset" => {
            let r = sw.index_of(Resource::Register, a.str(2, "register_array_name")?).ok_or(Fault::Code(1))?;
            let rc = code(|e| array_code(e, 3));
            match method {
                "bm_register_read" => {
                    let v = sw.register_read(r, a.i32(3, "idx")?.max(-1) as usize).map_err(rc)?;
                    Ok(Some(Val::I64(v as i64)))
                }
                "bm_register_read_all" => Ok(Some(Val::List(
                    TType::I64,
                    sw.register_values(r).into_iter().map(|v| Val::I64(v as i64)).collect(),
                ))),
                "bm_register_write" => {
                    let i = a.i32(3, "index")?.max(-1) as usize;
                    let v = a.i64(4, "value")? as u64 as u128;
                    pool.change_shared(|sw| sw.register_write(r, i, v)).map_err(rc)?;
                    Ok(None)
                }
                "bm_register_write_range" => {
                    let (s0, e0) = (a.i32(3, "start_index")?, a.i32(4, "end_index")?);
                    let v = a.i64(5, "value")? as u64 as u128;
                    if s0 < 0 || e0 < s0 || e0 as usize >= sw.register_len(r) {
                        return Err(Fault::Code(2));
                    }
                    pool.change_shared(|sw| (s0..=e0).try_for_each(|i| sw.register_write(r, i as usize, v)))
                        .map_err(rc)?;
                    Ok(None)
                }
                _ => {
                    pool.change_shared(|sw| sw.register_reset(r));
                    Ok(None)
                }
            }
        }

        _ => Err(Fault::Unknown(format!("standard:{method} is not a method of the standard service"))),
    }
}
