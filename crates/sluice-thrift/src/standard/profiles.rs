//! The `standard` service's action-profile calls (`bm_mt_act_prof_*`):
//! members and groups added, changed, deleted and read, on every worker.

use sluice_control::device::Device;

use super::*;

/// Runs one call of this group (see the module documentation).
pub(super) fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let tc = code(table_code);
    let mut pool = dev.pool();
    let sw = pool.view();
    match method {
        // ---- action profiles
        "bm_mt_act_prof_add_member" => {
            let p = profile(sw, a, 2)?;
            let act = profile_action(sw, p, a.str(3, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(4, "action_data")?).map_err(&tc)?;
            let h = pool.apply(move |sw, _| sw.add_member(p, act, data.clone())).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_act_prof_modify_member" => {
            let p = profile(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            let act = profile_action(sw, p, a.str(4, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(5, "action_data")?).map_err(&tc)?;
            pool.apply(move |sw, _| sw.modify_member(p, m, act, data.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_delete_member" => {
            let p = profile(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            pool.apply(move |sw, _| sw.delete_member(p, m)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_create_group" => {
            let p = profile(sw, a, 2)?;
            if sw.program().profiles[p].selector.is_none() {
                return Err(Fault::Code(24)); // NO_ACTION_PROFILE_SELECTION
            }
            let h = pool.apply(move |sw, _| sw.create_group(p)).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_act_prof_delete_group" => {
            let p = profile(sw, a, 2)?;
            let g = handle(a, 3, "grp_handle")?;
            pool.apply(move |sw, _| sw.delete_group(p, g)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_add_member_to_group" | "bm_mt_act_prof_remove_member_from_group" => {
            let p = profile(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            let g = handle(a, 4, "grp_handle")?;
            let add = method == "bm_mt_act_prof_add_member_to_group";
            pool.apply(move |sw, _| sw.group_member(p, g, m, add)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_get_members" | "bm_mt_act_prof_get_member" => {
            let p = profile(sw, a, 2)?;
            let one = (method == "bm_mt_act_prof_get_member").then(|| handle(a, 3, "mbr_handle")).transpose()?;
            let mut out = Vec::new();
            for (h, act, data) in sw.members(p) {
                if one.is_some_and(|x| x != h) {
                    continue;
                }
                out.push(st(vec![
                    (1, Val::I32(h as i32)),
                    (2, s(sw.program().actions[act as usize].name.clone())),
                    (3, super::action_data(sw, act, data)),
                ]));
            }
            match one {
                Some(_) => out.pop().map(Some).ok_or(Fault::Code(10)),
                None => Ok(Some(st_list(out))),
            }
        }
        "bm_mt_act_prof_get_groups" | "bm_mt_act_prof_get_group" => {
            let p = profile(sw, a, 2)?;
            let one = (method == "bm_mt_act_prof_get_group").then(|| handle(a, 3, "grp_handle")).transpose()?;
            let mut out = Vec::new();
            for (h, members) in sw.groups(p) {
                if one.is_some_and(|x| x != h) {
                    continue;
                }
                out.push(st(vec![
                    (1, Val::I32(h as i32)),
                    (2, Val::List(TType::I32, members.iter().map(|m| Val::I32(*m as i32)).collect())),
                ]));
            }
            match one {
                Some(_) => out.pop().map(Some).ok_or(Fault::Code(14)),
                None => Ok(Some(st_list(out))),
            }
        }

        _ => Err(Fault::Unknown(format!("standard:{method} is not a method of the standard service"))),
    }
}
