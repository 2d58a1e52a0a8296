//! Extern call sites that may see a header exactly as the parser extracted it.
//!
//! A keyed hash over "this header and the rest of the frame" (`p4sec_hash_payload(d, alg, key,
//! hdr.eth)`) can read the frame where it lies instead of assembling the header from its fields,
//! when the header's fields still hold the bytes they were extracted from and the payload starts
//! right after them. The extern used to check that per packet by comparing the fields with the
//! bytes; this analysis lets the engine vouch for it instead, which costs a comparison of two
//! offsets.
//!
//! The vouch has two halves:
//! - **here, once per program:** an `in` argument of an extern call that is a whole fixed header,
//!   field by field in wire order, and a may-write analysis over the pipeline (parser, checksum
//!   verification, ingress, egress, in that order; table applies run any of the table's actions)
//!   that finds no statement able to write one of the header's slots, or its validity, on any path
//!   to the call site other than `extract`. Statements whose writes it cannot pin down (a run-time
//!   header stack index, a header copy) count as writing every header. A call site reached twice (a
//!   table applied twice, an action in two tables) is vouched for only if every visit is clean.
//! - **per packet, in the engine:** the header is valid, it ends where the payload starts (its
//!   offset recorded by the parser's fast path in `Worker::hdr_off`), and the payload is still the
//!   received packet's bytes. Anything else, and the extern checks for itself. Validity stands in
//!   for a per-pass reset of the offset: every pass starts with all headers invalid, and the
//!   analysis above rules out any way to make the header valid but `extract`, which writes its
//!   offset (the fast path) or clears it (the general one).

use super::writes::{every_body, walk_all, writes, Writes};
use p4sec_ir::Direction;
use p4sec_ir::{words_for, Expr, ExternArg, HeaderRef, LValue, Program, Stmt};
use std::collections::HashMap;

/// A call site the engine may vouch for: which argument, which header, the header's length in
/// bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PristineArg {
    pub arg: usize,
    pub header: usize,
    /// The header's validity slot.
    pub valid: usize,
    pub len: usize,
}

/// Call sites (by the address of their `Stmt::ExternCall` in the program) whose argument is a
/// header no statement can have written before the call.
#[derive(Default)]
pub(crate) struct Pristine {
    sites: HashMap<usize, PristineArg>,
    /// The headers whose emit may take their never-written fields from the packet's bytes.
    pub(crate) unwritten: super::unwritten::Unwritten,
}

impl Pristine {
    pub(crate) fn of(&self, s: &Stmt) -> Option<PristineArg> {
        self.sites.get(&(s as *const Stmt as usize)).copied()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sites.len()
    }

    pub(crate) fn analyse(p: &Program) -> Pristine {
        let unwritten = super::unwritten::Unwritten::analyse(p);
        // every whole-header `in` argument of an extern call, anywhere in the program
        let mut cands: Vec<(usize, PristineArg)> = vec![];
        let mut visit = |s: &Stmt| {
            if let Stmt::ExternCall { args, .. } = s {
                if let Some(c) = args.iter().enumerate().find_map(|(i, a)| {
                    whole_header(p, a).map(|(h, len)| PristineArg {
                        arg: i,
                        header: h,
                        valid: p.headers[h].valid.slot as usize,
                        len,
                    })
                }) {
                    cands.push((s as *const Stmt as usize, c));
                }
            }
        };
        for b in every_body(p) {
            walk_all(b, &mut visit);
        }
        if cands.is_empty() {
            return Pristine {
                unwritten,
                ..Default::default()
            };
        }
        let mut headers: Vec<usize> = cands.iter().map(|c| c.1.header).collect();
        headers.sort_unstable();
        headers.dedup();
        let slots: Vec<Vec<(u32, u32)>> = headers.iter().map(|&h| header_slots(p, h)).collect();
        let mut a = Analysis {
            p,
            headers: &headers,
            slots,
            cands: cands.iter().map(|&(k, c)| (k, c.header)).collect(),
            verdict: HashMap::new(),
        };

        // the parser: any statement but `extract` that writes a header leaves it written, whatever
        // the order of states (extract itself refreshes the recorded offset, or clears it on the
        // general path)
        let mut dirty = vec![false; headers.len()];
        for st in &p.parser.states {
            a.parser_writes(&st.body, &mut dirty);
        }
        let parser_end = dirty.clone();
        for st in &p.parser.states {
            a.seq(&st.body, &mut parser_end.clone());
        }
        let mut d = parser_end;
        for b in [
            &p.verify_checksum.body,
            &p.ingress.body,
            &p.egress.body,
            &p.compute_checksum.body,
            &p.deparser.body,
        ] {
            a.seq(b, &mut d);
        }
        let verdict = a.verdict;
        Pristine {
            sites: cands
                .into_iter()
                .filter(|(k, _)| verdict.get(k) == Some(&true))
                .collect(),
            unwritten,
        }
    }
}

/// `a` is header `h`'s fields in wire order, whole bytes and fixed width: (h, its length in bytes).
fn whole_header(p: &Program, a: &ExternArg) -> Option<(usize, usize)> {
    if a.dir != Direction::In || a.width == 0 || !a.width.is_multiple_of(8) {
        return None;
    }
    let Some(Expr::Load(LValue::Static(first))) = a.parts.first() else {
        return None;
    };
    let h = p.headers.iter().position(|hd| {
        hd.fields
            .iter()
            .any(|f| f.loc.width > 0 && f.loc.slot == first.slot)
    })?;
    let hd = &p.headers[h];
    if hd.fields.iter().any(|f| f.varbit_len.is_some()) {
        return None;
    }
    let fields: Vec<_> = hd.fields.iter().filter(|f| f.loc.width > 0).collect();
    let same = fields.len() == a.parts.len()
        && fields
            .iter()
            .zip(&a.parts)
            .all(|(f, e)| matches!(e, Expr::Load(LValue::Static(l)) if *l == f.loc))
        && fields.iter().map(|f| f.loc.width).sum::<u32>() == a.width;
    same.then_some((h, (a.width / 8) as usize))
}

/// Header `h`'s slot ranges (fields and validity), as (first, past the last).
fn header_slots(p: &Program, h: usize) -> Vec<(u32, u32)> {
    let hd = &p.headers[h];
    hd.fields
        .iter()
        .map(|f| f.loc)
        .chain([hd.valid])
        .filter(|l| l.width > 0)
        .map(|l| (l.slot, l.slot + words_for(l.width)))
        .collect()
}

struct Analysis<'a> {
    p: &'a Program,
    /// The candidate headers, and per header its slot ranges.
    headers: &'a [usize],
    slots: Vec<Vec<(u32, u32)>>,
    /// Candidate call sites: statement address → header.
    cands: HashMap<usize, usize>,
    /// Per call site reached: clean on every visit so far.
    verdict: HashMap<usize, bool>,
}

impl Analysis<'_> {
    /// Header `h`'s place among the candidate headers (and in the `dirty` states).
    fn index(&self, h: usize) -> Option<usize> {
        self.headers.binary_search(&h).ok()
    }

    /// Marks in `dirty` the candidate headers `s`'s own writes may reach (`extract` included when
    /// `extracts`).
    fn mark(&self, s: &Stmt, dirty: &mut [bool], extracts: bool) {
        match writes(s) {
            Writes::Nothing => {}
            Writes::Locs(ls) => self.mark_locs(&ls, dirty),
            Writes::Header(_) if !extracts && matches!(s, Stmt::Extract { .. }) => {}
            Writes::Header(HeaderRef::Static(h)) => {
                if let Some(k) = self.index(*h as usize) {
                    dirty[k] = true;
                }
            }
            Writes::Header(_) | Writes::Everything => dirty.iter_mut().for_each(|d| *d = true),
        }
    }

    fn mark_locs(&self, ls: &[&LValue], dirty: &mut [bool]) {
        let hits = |l: &LValue, k: usize| match l {
            LValue::Static(l) => {
                l.width > 0
                    && self.slots[k]
                        .iter()
                        .any(|&(a, b)| l.slot < b && a < l.slot + words_for(l.width))
            }
            LValue::Dynamic { .. } => true,
        };
        for (k, d) in dirty.iter_mut().enumerate() {
            *d |= ls.iter().any(|l| hits(l, k));
        }
    }

    /// The parser's writes other than `extract`, anywhere in `b`.
    fn parser_writes(&self, b: &[Stmt], dirty: &mut [bool]) {
        walk_all(b, &mut |s| match s {
            Stmt::If { .. } | Stmt::Switch { .. } | Stmt::Block { .. } | Stmt::Loop { .. } => {}
            _ => self.mark(s, dirty, false),
        });
    }

    /// Walks `b` in order from the state `dirty`, recording call sites' verdicts; `dirty` becomes
    /// the state after `b` (the union over its paths).
    fn seq(&mut self, b: &[Stmt], dirty: &mut Vec<bool>) {
        for s in b {
            self.one(s, dirty);
        }
    }

    fn one(&mut self, s: &Stmt, dirty: &mut Vec<bool>) {
        match s {
            Stmt::If { then, else_, .. } => {
                let mut other = dirty.clone();
                self.seq(then, dirty);
                self.seq(else_, &mut other);
                join(dirty, &other);
            }
            Stmt::Switch { cases, default, .. } => {
                let start = dirty.clone();
                self.seq(default, dirty);
                for (_, c) in cases {
                    let mut d = start.clone();
                    self.seq(c, &mut d);
                    join(dirty, &d);
                }
            }
            Stmt::Block { body, .. } => self.seq(body, dirty),
            // the state at the loop's head: the entry state joined with the state after each
            // iteration, until it stops growing (each round adds at least one header, or stops)
            Stmt::Loop { body, .. } => loop {
                let head = dirty.clone();
                self.seq(body, dirty);
                join(dirty, &head);
                if *dirty == head {
                    break;
                }
            },
            Stmt::ApplyTable {
                table,
                hit,
                action_run,
            } => {
                let p = self.p;
                let Some(t) = p.tables.get(*table as usize) else {
                    dirty.iter_mut().for_each(|d| *d = true);
                    return;
                };
                // a miss without a default action changes nothing; otherwise one of the actions
                // runs
                let start = dirty.clone();
                let actions = t
                    .actions
                    .iter()
                    .map(|a| a.action)
                    .chain([t.default_action.action]);
                for a in actions {
                    let Some(act) = p.actions.get(a as usize) else {
                        dirty.iter_mut().for_each(|d| *d = true);
                        continue;
                    };
                    let mut d = start.clone();
                    self.seq(&act.body, &mut d);
                    join(dirty, &d);
                }
                let ls: Vec<LValue> = [hit, action_run]
                    .into_iter()
                    .flatten()
                    .map(|l| LValue::Static(*l))
                    .collect();
                self.mark_locs(&ls.iter().collect::<Vec<_>>(), dirty);
            }
            Stmt::CallAction { action, .. } => match self.p.actions.get(*action as usize) {
                Some(act) => self.seq(&act.body, dirty),
                None => dirty.iter_mut().for_each(|d| *d = true),
            },
            // in a parser state: the header's fields are the bytes just extracted (or its offset is
            // cleared)
            Stmt::Extract {
                hdr: HeaderRef::Static(h),
                ..
            } => {
                if let Some(k) = self.index(*h as usize) {
                    dirty[k] = false;
                }
            }
            _ => {
                let key = s as *const Stmt as usize;
                if let Some(&h) = self.cands.get(&key) {
                    let k = self.index(h).expect("a candidate's header is listed");
                    let v = self.verdict.entry(key).or_insert(true);
                    *v &= !dirty[k];
                }
                self.mark(s, dirty, true);
            }
        }
    }
}

fn join(into: &mut [bool], other: &[bool]) {
    for (a, b) in into.iter_mut().zip(other) {
        *a |= *b;
    }
}

#[cfg(test)]
mod tests;
