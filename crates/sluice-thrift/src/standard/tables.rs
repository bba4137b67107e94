//! The `standard` service's match-table calls (`bm_mt_*` but profiles,
//! counters and meters): entries added, modified, deleted and read, default
//! actions, timeouts. Changes go through `Session::apply` / `commit`
//! (every worker has them when the call answers); reads come from the master.

use sluice_control::device::Device;

use super::*;

/// Runs one call of this group (see the module documentation).
pub(super) fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let tc = code(table_code);
    let mut pool = dev.pool();
    let sw = pool.view();
    match method {
        // ---- match tables
        "bm_mt_get_num_entries" => {
            let t = table(sw, a, 2)?;
            Ok(Some(Val::I64(sw.entry_count(t) as i64)))
        }
        "bm_mt_clear_entries" => {
            let t = table(sw, a, 2)?;
            let reset = a.bool(3, "reset_default_entry").unwrap_or(false);
            pool.commit(move |sw, _| {
                sw.clear_entries(t);
                if reset {
                    sw.reset_default_entry(t);
                }
            });
            Ok(None)
        }
        "bm_mt_add_entry" => {
            let t = table(sw, a, 2)?;
            let key = adapt_key(sw, t, match_key(a.list(3, "match_key")?)?);
            let act = table_action(sw, t, a.str(4, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(5, "action_data")?).map_err(&tc)?;
            let prio = options_priority(a, 6);
            let action = EntryAction::Direct { action: act, data };
            let h = pool.apply(move |sw, _| sw.add_entry(t, key.clone(), action.clone(), prio)).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_indirect_add_entry" | "bm_mt_indirect_ws_add_entry" => {
            let t = table(sw, a, 2)?;
            if sw.program().tables[t].profile.is_none() {
                return Err(WRONG_TABLE_TYPE);
            }
            let key = adapt_key(sw, t, match_key(a.list(3, "match_key")?)?);
            let h = handle(a, 4, "handle")?;
            let action =
                if method == "bm_mt_indirect_add_entry" { EntryAction::Member(h) } else { EntryAction::Group(h) };
            if let EntryAction::Group(g) = action {
                let p = sw.program().tables[t].profile.unwrap_or(0) as usize;
                if sw.group(p, g).is_some_and(|m| m.is_empty()) {
                    return Err(Fault::Code(16)); // EMPTY_GRP
                }
            }
            let prio = options_priority(a, 5);
            let h = pool.apply(move |sw, _| sw.add_entry(t, key.clone(), action.clone(), prio)).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_set_default_action" => {
            let t = table(sw, a, 2)?;
            // An indirect table's default is a member (`bm_mt_indirect_set_default_member`).
            if sw.program().tables[t].profile.is_some() {
                return Err(WRONG_TABLE_TYPE);
            }
            let act = table_action(sw, t, a.str(3, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(4, "action_data")?).map_err(&tc)?;
            pool.apply(move |sw, _| sw.set_default_entry(t, act, data.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_reset_default_entry" | "bm_mt_indirect_reset_default_entry" => {
            let t = table(sw, a, 2)?;
            let indirect = method == "bm_mt_indirect_reset_default_entry";
            if sw.program().tables[t].profile.is_some() != indirect {
                return Err(WRONG_TABLE_TYPE);
            }
            // A const default is put back as it was: bmv2 succeeds too.
            pool.commit(move |sw, _| sw.reset_default_entry(t));
            Ok(None)
        }
        "bm_mt_indirect_set_default_member" => {
            let t = table(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            let p = sw.program().tables[t].profile.ok_or(WRONG_TABLE_TYPE)? as usize;
            let Some((act, data)) = sw.member(p, m).map(|(a, d)| (a, Box::<[u8]>::from(d))) else {
                return Err(Fault::Code(10));
            };
            pool.apply(move |sw, _| sw.set_default_entry(t, act, data.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_indirect_ws_set_default_group" => {
            Err(Fault::Internal("a group as default action is not supported by Sluice".into()))
        }
        "bm_mt_delete_entry" | "bm_mt_indirect_delete_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            pool.apply(move |sw, _| sw.delete_entry(t, h)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_modify_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let act = table_action(sw, t, a.str(4, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(5, "action_data")?).map_err(&tc)?;
            let action = EntryAction::Direct { action: act, data };
            pool.apply(move |sw, _| sw.modify_entry(t, h, action.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_indirect_modify_entry" | "bm_mt_indirect_ws_modify_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let x = handle(a, 4, "handle")?;
            let action =
                if method == "bm_mt_indirect_modify_entry" { EntryAction::Member(x) } else { EntryAction::Group(x) };
            pool.apply(move |sw, _| sw.modify_entry(t, h, action.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_set_entry_ttl" | "bm_mt_indirect_set_entry_ttl" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let ms = a.i32(4, "timeout_ms")?.max(0) as u32;
            pool.apply(move |sw, _| sw.set_entry_ttl(t, h, ms)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_get_entries" => {
            let Some(t) = sw.index_of(Resource::Table, a.str(2, "table_name")?) else {
                return Ok(Some(st_list(Vec::new())));
            };
            Ok(Some(pool.read(|sw| {
                let handles: Vec<u32> = sw.entries(t).map(|(h, _)| h).collect();
                st_list(handles.into_iter().filter_map(|h| mt_entry(sw, t, h)).collect())
            })))
        }
        "bm_mt_get_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            sw.entry(t, h).map_err(|e| Fault::Code(table_code(&e)))?;
            Ok(Some(pool.read(|sw| mt_entry(sw, t, h)).ok_or(Fault::Code(2))?))
        }
        "bm_mt_get_default_entry" => {
            let Some(t) = sw.index_of(Resource::Table, a.str(2, "table_name")?) else {
                return Ok(Some(st(vec![(1, Val::I32(0))])));
            };
            Ok(Some(default_entry(sw, t)))
        }
        "bm_mt_get_entry_from_key" => {
            let t = table(sw, a, 2)?;
            let key = match_key(a.list(3, "match_key")?)?;
            if key.is_empty() {
                return Ok(Some(st(vec![
                    (1, st_list(Vec::new())),
                    (2, st(vec![(1, Val::I32(-1))])),
                    (3, Val::I32(-1)),
                    (4, default_entry(sw, t)),
                ])));
            }
            let key = adapt_key(sw, t, key);
            let h = sw.find_entry(t, key, options_priority(a, 4)).map_err(&tc)?.ok_or(BAD_MATCH_KEY)?;
            Ok(Some(pool.read(|sw| mt_entry(sw, t, h)).ok_or(Fault::Code(2))?))
        }

        _ => Err(Fault::Unknown(format!("standard:{method} is not a method of the standard service"))),
    }
}
