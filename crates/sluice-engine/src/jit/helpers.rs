//! The engine functions generated code calls (`h_*`, registered in the
//! module as `sluice_h_*`), and the table results they hand back to it.
//!
//! Every helper takes the running function's `JitCtx` and reaches the
//! packet's `Exec` through `JitCtx::exec`. Helpers that run engine code
//! that may write the PHV mark it dirty (`exec_of`); the others only read
//! (`exec_reading`). Helpers that ran interpreter actions report the
//! packet's need of the general path in `JitCtx::special` (`settle`). The
//! packet metadata are reset lazily, by the first helper that needs them
//! (see `MARK_META_FRESH`).

use super::abi::{decode_node, encode_node, JitCtx, HOT_RECORD, MARK_DIRTY, MARK_META_FRESH};
use crate::control::Exec;
use crate::tables::HotEntry;

/// The `Exec` behind a context.
///
/// # Safety
/// `ctx` must be the live context of a running compiled pipeline.
unsafe fn exec_of<'a>(ctx: *mut JitCtx) -> (&'a mut Exec<'a>, &'a mut [u8; 64]) {
    // Engine code may write any field (see `MARK_DIRTY`).
    (*ctx).marks |= MARK_DIRTY;
    exec_reading(ctx)
}

/// [`exec_of`] for engine code that writes no PHV field: a table lookup
/// that hands its action back to generated code (its counters and caches
/// are table state), a meter (generated code writes its colour). Why: the
/// next packet's setup then stays the short one (see `MARK_DIRTY`);
/// programs that look up or meter through helpers on every packet would
/// otherwise zero the whole PHV for every packet.
///
/// # Safety
/// As [`exec_of`].
unsafe fn exec_reading<'a>(ctx: *mut JitCtx) -> (&'a mut Exec<'a>, &'a mut [u8; 64]) {
    let c = &mut *ctx;
    let ex = &mut *(c.exec as *mut Exec<'a>);
    if c.marks & MARK_META_FRESH == 0 {
        fresh_meta(ex.meta, c.len);
        c.marks |= MARK_META_FRESH;
    }
    (ex, &mut c.data)
}

/// Resets packet metadata for a packet of `len` bytes as it arrives.
pub(super) fn fresh_meta(meta: &mut crate::control::PktMeta, len: u64) {
    let len = len as u32;
    *meta = crate::control::PktMeta { len_reg: len, ingress_len: len, ..Default::default() };
}

/// After a helper ran interpreter code: takes its `exit` flag (the compiled
/// code acts on the returned value, so the flag never leaks into the next
/// pipeline of a forwarding run) and records in the context whether the
/// packet now needs the general path after its pipeline.
///
/// # Safety
/// As [`exec_of`].
unsafe fn settle(ctx: *mut JitCtx) -> bool {
    let (ex, _) = exec_of(ctx);
    let exit = std::mem::take(&mut ex.meta.exit);
    let m = &*ex.meta;
    let special = m.clone.is_some()
        || m.resubmit.is_some()
        || m.recirculate.is_some()
        || m.truncate.is_some()
        || m.len_reg != m.ingress_len;
    (*ctx).special |= special as u64;
    exit
}

pub(super) extern "C" fn h_table(ctx: *mut JitCtx, ti: u32) -> i64 {
    // SAFETY: called only by generated code with its live context.
    unsafe { table_result(ctx, |ex, data| ex.apply_table_for_jit(ti as usize, data)) }
}

/// Runs a table helper's work `f` (one table's lookup, which counts exactly
/// one lookup of it in `State::lookups`: `jit::flow` relies on that) on the
/// context's `Exec` and data area; when the table was applied by the
/// interpreter (a negative result), settles the context as `settle` says.
/// The one body of the table helpers.
///
/// # Safety
/// `ctx` must be the live context of a running compiled pipeline.
#[inline(always)]
unsafe fn table_result(ctx: *mut JitCtx, f: impl FnOnce(&mut Exec<'_>, &mut [u8; 64]) -> i64) -> i64 {
    // A non-negative result hands the action back: the lookup wrote no field.
    let (ex, data) = exec_reading(ctx);
    let r = f(ex, data);
    if r < 0 {
        // The interpreter ran the table's action (`settle` marks the PHV dirty).
        settle(ctx);
    }
    r
}

pub(super) extern "C" fn h_action(ctx: *mut JitCtx, ai: u32) -> u32 {
    // SAFETY: as above.
    let (ex, data) = unsafe { exec_of(ctx) };
    let d = *data;
    ex.run_action(ai as usize, &d);
    // SAFETY: as above.
    unsafe { settle(ctx) as u32 }
}

pub(super) extern "C" fn h_action_nodata(ctx: *mut JitCtx, ai: u32) -> u32 {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.run_action(ai as usize, &[]);
    // SAFETY: as above.
    unsafe { settle(ctx) as u32 }
}

pub(super) extern "C" fn h_cond(ctx: *mut JitCtx, ci: u32) -> u32 {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.eval_cond(ci as usize) as u32
}

pub(super) extern "C" fn h_run_from(ctx: *mut JitCtx, node: i64) {
    // SAFETY: as above.
    let in_flow = unsafe { (*ctx).in_flow != 0 };
    let (ex, _) = unsafe { exec_of(ctx) };
    if in_flow {
        // Lookups off the batch function's graph: not among its applies (`jit::flow`).
        let before: Vec<u64> = ex.state.lookups.iter().map(|[h, m]| h + m).collect();
        ex.run_pipeline(decode_node(node));
        for (t, b) in before.into_iter().enumerate() {
            let [h, m] = ex.state.lookups[t];
            ex.state.outside_flow[t] += h + m - b;
        }
    } else {
        ex.run_pipeline(decode_node(node));
    }
    // SAFETY: as above.
    unsafe { settle(ctx) };
}

/// The result of table `ti` for an indirect entry whose hot record `rec`
/// the generated code found inline (see `Gen::inline_lookup`); the same
/// encoding as `h_table`.
pub(super) extern "C" fn h_indirect(ctx: *mut JitCtx, ti: u32, rec: *const HotEntry) -> i64 {
    // SAFETY: `rec` points into the table's current view (valid until the
    // table changes, which cannot happen while a packet runs).
    let hot = unsafe { *rec };
    // SAFETY: called only by generated code with its live context.
    unsafe {
        table_result(ctx, |ex, data| match ex.indirect_for_jit(ti as usize, &hot, data) {
            Some(r) => {
                // A hit the inline lookup found (`State::lookups`).
                ex.state.lookups[ti as usize][0] += 1;
                r
            }
            None => ex.apply_table_for_jit(ti as usize, data),
        })
    }
}

/// `h_table` for a table whose key the generated code built as words (see
/// `Gen::word_lookup`).
pub(super) extern "C" fn h_table_words(ctx: *mut JitCtx, ti: u32, w0: u64, w1: u64, w2: u64, w3: u64) -> i64 {
    // SAFETY: called only by generated code with its live context.
    unsafe { table_result(ctx, |ex, data| ex.apply_table_words_for_jit(ti as usize, [w0, w1, w2, w3], data)) }
}

/// `h_table` for a table whose integer key generated code built (see
/// `Gen::inline_lookup`).
pub(super) extern "C" fn h_table_key(ctx: *mut JitCtx, ti: u32, key: u64) -> i64 {
    // SAFETY: called only by generated code with its live context.
    unsafe { table_result(ctx, |ex, data| ex.apply_table_key_for_jit(ti as usize, key, data)) }
}

/// Executes cell `i` of meter array `arr` for the running packet (as the
/// interpreter's `execute_meter`): the colour, 0 (green) out of range.
pub(super) extern "C" fn h_meter(ctx: *mut JitCtx, arr: u32, i: u64) -> u64 {
    // SAFETY: as above. Generated code writes the colour to its field.
    let (ex, _) = unsafe { exec_reading(ctx) };
    u64::from(ex.execute_meter(arr as usize, i as usize))
}

/// Puts action data `d` (at most `HOT_DATA` bytes) into `out`, zero-padded
/// to `HOT_RECORD` bytes. Why not two slice copies: their lengths are known
/// only at run time, so they call `memcpy` and `memset`; a fixed clear and a
/// short copy are a few moves.
#[inline(always)]
fn put_data(out: &mut [u8; 64], d: &[u8]) {
    out[..HOT_RECORD].fill(0);
    sluice_lookup::mem::copy_short(&mut out[..d.len()], d);
}

/// Table results as the compiled code consumes them (see `h_table`).
impl Exec<'_> {
    /// Looks table `ti` up for compiled code. When the table has nothing
    /// else to do on a hit (no direct counter or meter, no idle timeout) and
    /// the action it lands on (a direct entry's, a profile member's, the
    /// member an action selector picks, or the default) has at most
    /// `HOT_DATA` bytes of data, it copies the zero-padded data into `out`
    /// and returns `2 * position of the action in the table + hit`: the
    /// action then runs in generated code. Anything else is applied
    /// completely here; the result is then `-1 - encoded next node`, or
    /// `i64::MIN` when the action exited.
    pub fn apply_table_for_jit(&mut self, ti: usize, out: &mut [u8; 64]) -> i64 {
        if self.plan.tables[ti].hit_returns_to_jit() {
            let hit = self.lookup_hit(ti);
            return self.result_or_apply(ti, hit, out);
        }
        self.apply_table_fully(ti)
    }

    /// [`Exec::apply_table_for_jit`] for a table whose key generated code
    /// built as the four words `words` of its bytes (see `Gen::word_lookup`).
    pub fn apply_table_words_for_jit(&mut self, ti: usize, words: [u64; 4], out: &mut [u8; 64]) -> i64 {
        let tp = &self.plan.tables[ti];
        if self.trace.is_some() || !tp.hit_returns_to_jit() || tp.key_bytes > 32 {
            return self.apply_table_for_jit(ti, out);
        }
        // The key's bytes (range checks, byte-keyed indexes) are written
        // out by the lookup, only when it needs them.
        let hit = self.state.tables[ti].lookup_cached_words(tp.key_bytes, &words);
        self.result_or_apply(ti, hit, out)
    }

    /// [`Exec::apply_table_for_jit`] for a table whose integer key (at most
    /// 64 bits, as `control::integer_key` builds it) generated code built.
    pub fn apply_table_key_for_jit(&mut self, ti: usize, key: u64, out: &mut [u8; 64]) -> i64 {
        if self.trace.is_some() || !self.plan.tables[ti].hit_returns_to_jit() {
            return self.apply_table_for_jit(ti, out);
        }
        match self.state.tables[ti].lookup_u128(u128::from(key)) {
            Some(hit) => self.result_or_apply(ti, hit, out),
            // An index that needs the key's bytes.
            None => self.apply_table_for_jit(ti, out),
        }
    }

    /// The result for generated code of lookup result `hit` of table `ti`
    /// (see [`Exec::apply_table_for_jit`]); `None` when the table has to be
    /// applied completely.
    fn result_for_jit(&mut self, ti: usize, hit: Option<u32>, out: &mut [u8; 64]) -> Option<i64> {
        let r = self.action_for_jit(ti, hit, out)?;
        // The lookup, as `apply_table` counts it (here only, the table not
        // being applied completely).
        self.state.lookups[ti][usize::from(hit.is_none())] += 1;
        if let (Some(h), true) = (hit, self.plan.tables[ti].with_counters) {
            // The direct counter, as `apply_table` counts a hit (only here,
            // once the table is not going to be applied completely).
            self.count_hit(ti, h);
        }
        Some(r)
    }

    /// [`Exec::result_for_jit`], or the table applied completely when the
    /// result cannot go back to generated code.
    fn result_or_apply(&mut self, ti: usize, hit: Option<u32>, out: &mut [u8; 64]) -> i64 {
        match self.result_for_jit(ti, hit, out) {
            Some(r) => r,
            None => self.apply_table_fully(ti),
        }
    }

    /// [`Exec::result_for_jit`] but for the direct counter.
    fn action_for_jit(&mut self, ti: usize, hit: Option<u32>, out: &mut [u8; 64]) -> Option<i64> {
        let tp = &self.plan.tables[ti];
        let (a, hit) = match hit {
            Some(h) => {
                let hot = self.state.tables[ti].hot(h);
                if hot.action != u32::MAX {
                    // The record is zero-padded; `out` beyond it stays zero.
                    out[..hot.data.len()].copy_from_slice(&hot.data);
                    (hot.action, 1)
                } else {
                    let hot = *hot;
                    return self.indirect_for_jit(ti, &hot, out);
                }
            }
            None => match &self.state.tables[ti].default {
                Some((a, d)) if d.len() <= crate::tables::HOT_DATA => {
                    put_data(out, d);
                    (*a, 0)
                }
                _ => return None,
            },
        };
        tp.actions.iter().position(|x| *x == a).map(|pos| 2 * pos as i64 + hit)
    }

    /// Applies table `ti` in the interpreter, for generated code: `-1 -
    /// encoded next node`, or `i64::MIN` when the action exited.
    fn apply_table_fully(&mut self, ti: usize) -> i64 {
        let next = self.apply_table(ti);
        if self.meta.exit {
            i64::MIN
        } else {
            -1 - encode_node(next)
        }
    }

    /// The result of an indirect entry (hot record `hot`, a profile member
    /// or group) of table `ti`, as [`Exec::apply_table_for_jit`] returns it:
    /// the member's (or the member the selector picks) action and data for
    /// generated code, or the end of an empty group. `None` when the member
    /// is missing or its data does not fit (the caller then applies the
    /// table completely).
    fn indirect_for_jit(&mut self, ti: usize, hot: &HotEntry, out: &mut [u8; 64]) -> Option<i64> {
        let tp = &self.plan.tables[ti];
        let (is_group, id) = hot.indirect()?;
        let m = if is_group {
            match self.select_member(tp.profile, id) {
                Some(m) => m,
                // An empty group runs no action (as `apply_table`).
                None => return Some(-1 - encode_node(tp.base_default_next)),
            }
        } else {
            id
        };
        let a = self.member_for_jit(tp.profile, m, out)?;
        tp.actions.iter().position(|x| *x == a).map(|pos| 2 * pos as i64 + 1)
    }

    /// Copies profile member `m`'s action data into `out` (zero-padded to
    /// `HOT_RECORD` bytes) and returns its action, when the data fits.
    fn member_for_jit(&self, profile: Option<u32>, m: u32, out: &mut [u8; 64]) -> Option<u32> {
        let p = &self.state.profiles[profile? as usize];
        let (a, d) = p.members.get(m as usize)?.as_ref()?;
        if d.len() > crate::tables::HOT_DATA {
            return None;
        }
        put_data(out, d);
        Some(*a)
    }
}
