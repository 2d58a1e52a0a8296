//! Header fields that nothing but `extract` writes, for a deparser that emits a header from the
//! packet's bytes.
//!
//! A router rewrites two fields of the IPv4 header and leaves ten as they came in. When the
//! deparser emits such a header, the fields nothing can have written still hold the bytes they
//! were extracted from, so the emit can copy the header's bytes from the packet and patch only
//! the fields some statement may write, instead of assembling every field.
//!
//! The analysis here is flow-insensitive and runs once per program. A header qualifies when:
//! - it is not an element of a header stack;
//! - no statement anywhere in the program (parser states, controls, actions) makes it valid other
//!   than `extract`: no `setValid()`, no whole-header copy into it;
//! - no statement writes through a run-time index (a header stack element chosen at run time), which
//!   could reach any header.
//!
//! For a qualifying header it lists the fields some statement other than `extract` may write
//! (assignments, extern `out`/`inout` arguments and results, `update_checksum`, hashes, register
//! reads, meters, random, a table's `hit`/`action_run` locations). The engine's half, per packet:
//! the header was extracted by a fast path in this pass (its offset is recorded in
//! `Worker::hdr_off`, which every pass resets for the headers listed in `tracked_headers`, and
//! which the general extract path and the engine's cold paths that re-parse or replay a saved
//! state clear), so its never-written fields are the bytes at that offset.

use super::writes::{every_body, walk_all, writes, Writes};
use p4sec_ir::{words_for, Expr, HeaderRef, LValue, Program, Stmt};
use std::collections::HashMap;

/// The analysis's state as it walks the program.
struct State {
    /// Per header: it still qualifies.
    ok: Vec<bool>,
    /// Per header: the first slots of its fields written so far.
    written: Vec<Vec<u32>>,
    /// A write through a run-time index: no header qualifies.
    everything: bool,
}

/// `e` is the constant 0.
fn is_zero(e: &Expr) -> bool {
    match e {
        Expr::Small { value, .. } => *value == 0,
        Expr::Const(v) => v.words.iter().all(|&w| w == 0),
        _ => false,
    }
}

/// Per header of the program: `None` when its emit must build it from its fields, or the slots
/// of the fields (their first slot) that some statement other than `extract` may write.
#[derive(Default, Debug, PartialEq, Eq)]
pub(crate) struct Unwritten {
    headers: Vec<Option<Vec<u32>>>,
}

impl Unwritten {
    /// The first slots of header `h`'s fields that may be written, when `h` qualifies (see the
    /// module's doc).
    pub(crate) fn written(&self, h: usize) -> Option<&[u32]> {
        self.headers.get(h)?.as_deref()
    }

    /// The qualifying headers.
    pub(crate) fn headers(&self) -> impl Iterator<Item = usize> + '_ {
        self.headers
            .iter()
            .enumerate()
            .filter_map(|(h, w)| w.as_ref().map(|_| h))
    }

    pub(crate) fn analyse(p: &Program) -> Unwritten {
        let n = p.headers.len();
        let mut ok = vec![true; n];
        for s in &p.stacks {
            for &e in &s.elements {
                if let Some(o) = ok.get_mut(e as usize) {
                    *o = false;
                }
            }
        }
        // per slot: the headers whose field (its first slot) or validity (`None`) lies there
        let mut owners: HashMap<u32, Vec<(usize, Option<u32>)>> = HashMap::new();
        for (h, hd) in p.headers.iter().enumerate() {
            for f in hd.fields.iter().filter(|f| f.loc.width > 0) {
                for s in f.loc.slot..f.loc.slot.saturating_add(words_for(f.loc.width)) {
                    owners.entry(s).or_default().push((h, Some(f.loc.slot)));
                }
            }
            if hd.valid.width > 0 {
                owners.entry(hd.valid.slot).or_default().push((h, None));
            }
        }
        let top = owners.keys().max().map_or(0, |&m| m + 1);
        // a write of `l`: the fields it reaches are written; a header it may make valid (any
        // write of its validity but `setInvalid`'s constant 0) no longer qualifies
        let mark = |l: &LValue, zero: bool, st: &mut State| match l {
            LValue::Static(l) if l.width == 0 => {}
            LValue::Static(l) => {
                let end = l.slot.saturating_add(words_for(l.width)).min(top);
                for s in l.slot..end {
                    for &(h, field) in owners.get(&s).into_iter().flatten() {
                        match field {
                            Some(x) => st.written[h].push(x),
                            None if !zero => st.ok[h] = false,
                            None => {}
                        }
                    }
                }
            }
            LValue::Dynamic { .. } => st.everything = true,
        };
        let mut st = State {
            ok,
            written: vec![vec![]; n],
            everything: false,
        };
        for b in every_body(p) {
            walk_all(b, &mut |s: &Stmt| match s {
                // walked into by `walk_all`, or their writes are the actions' own statements
                // (action bodies are walked too) and the parameters' slots
                Stmt::If { .. }
                | Stmt::Switch { .. }
                | Stmt::Block { .. }
                | Stmt::Loop { .. }
                | Stmt::CallAction { .. } => {}
                Stmt::ApplyTable {
                    hit, action_run, ..
                } => {
                    for l in [hit, action_run].into_iter().flatten() {
                        mark(&LValue::Static(*l), false, &mut st);
                    }
                }
                Stmt::Assign { dst, src } => mark(dst, is_zero(src), &mut st),
                // a static header's offset is recorded or cleared with its fields; a stack's
                // elements never qualify
                Stmt::Extract { .. } => {}
                Stmt::SetValid { hdr, valid } => {
                    if let (HeaderRef::Static(h), true) = (hdr, valid) {
                        if let Some(o) = st.ok.get_mut(*h as usize) {
                            *o = false;
                        }
                    }
                }
                Stmt::CopyHeader { dst, .. } => {
                    if let HeaderRef::Static(h) = dst {
                        if let Some(o) = st.ok.get_mut(*h as usize) {
                            *o = false;
                        }
                    }
                }
                _ => match writes(s) {
                    Writes::Nothing => {}
                    Writes::Locs(ls) => {
                        for l in ls {
                            mark(l, false, &mut st);
                        }
                    }
                    // (the statements above are all that write whole headers)
                    Writes::Header(_) | Writes::Everything => st.everything = true,
                },
            });
        }
        let State {
            ok,
            written,
            everything,
        } = st;
        if everything {
            return Unwritten {
                headers: vec![None; n],
            };
        }
        Unwritten {
            headers: ok
                .into_iter()
                .zip(written)
                .map(|(ok, mut w)| {
                    w.sort_unstable();
                    w.dedup();
                    ok.then_some(w)
                })
                .collect(),
        }
    }
}
