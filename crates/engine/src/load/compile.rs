//! Load-time compilation of the IR into closures.
//!
//! The interpreter (`exec.rs` and the stage files it calls) decides at every node what kind of node
//! it is, how wide it is and which path (narrow or wide) to take. Here those decisions are made
//! once, when the engine is built: each statement and each expression of at most 64 bits becomes a
//! closure specialised for its shape (for example "slot 7 = slot 3 - 1, masked to 8 bits").
//! Anything not covered here is wrapped in a closure that calls the interpreter, so semantics have
//! one definition and the compiled forms are checked against it by the whole STF corpus. The
//! compiled fast paths of `extract` and `emit` are in `headers.rs`.
//!
//! This file compiles the program's blocks into a [`Code`]; the statements are compiled in
//! `statements.rs` (runs of simple assignments in `assigns.rs`), the expressions in
//! `expressions.rs`, the whole-header checksums in `checksums.rs`, with `context.rs`'s [`Cx`].

pub(crate) use super::checksums::header_checksum;
use super::checksums::{csum16, header_checksum_update};
use super::context::mask;
pub(crate) use super::context::{may_fail, stmt_may_fail, Cx};
pub(crate) use super::expressions::expr;
pub(crate) use super::statements::block;
pub(crate) use super::statements::stmt;
use crate::code::Flow;
use crate::engine::{CBlock, Deferred, LeanNext, SF, XF};
use crate::{Engine, Worker};
use p4sec_externs::checksum;
use p4sec_ir::*;

/// Per parser state: compiled select keys (see [`Code::select_keys`]).
type SelectKeys = Vec<Option<Vec<XF>>>;
/// Per parser state: select cases as (mask, value) per key (see [`Code::select_cases`]).
type SelectCases = Vec<Option<Vec<(Vec<(u64, u64)>, Next)>>>;

pub(crate) fn compile(cx: &Cx) -> Code {
    let p = cx.prog;
    let select_keys: SelectKeys = p
        .parser
        .states
        .iter()
        .map(|s| match &s.transition {
            Transition::Select { keys, .. }
                if keys.len() <= 8 && keys.iter().all(|k| k.width() <= 64) =>
            {
                Some(keys.iter().map(expr).collect())
            }
            _ => None,
        })
        .collect();
    let select_cases: SelectCases = p
        .parser
        .states
        .iter()
        .zip(&select_keys)
        .map(
            |(s, k): (&ParserState, &Option<Vec<XF>>)| match (&s.transition, k) {
                (Transition::Select { cases, .. }, Some(_)) => cases
                    .iter()
                    .map(|(ms, n)| {
                        let ms: Option<Vec<(u64, u64)>> = ms
                            .iter()
                            .map(|m| match m {
                                KeyMatch::Any => Some((0, 0)),
                                KeyMatch::Exact(v) if v.words.iter().skip(1).all(|x| *x == 0) => {
                                    Some((u64::MAX, v.as_u64()))
                                }
                                KeyMatch::Mask { value, mask } => {
                                    Some((mask.as_u64(), value.as_u64() & mask.as_u64()))
                                }
                                _ => None,
                            })
                            .collect();
                        ms.map(|ms| (ms, n.clone()))
                    })
                    .collect(),
                _ => None,
            },
        )
        .collect();
    let lean_next = p
        .parser
        .states
        .iter()
        .zip(&select_cases)
        .map(
            |(st, cs): (&ParserState, &Option<Vec<(Vec<(u64, u64)>, Next)>>)| match (
                &st.transition,
                cs,
            ) {
                (Transition::Goto(n), _) => LeanNext::Goto(n.clone()),
                (Transition::Select { keys, .. }, Some(cs))
                    if keys.len() == 1 && keys[0].width() <= 64 && !may_fail(&keys[0]) =>
                {
                    LeanNext::SelectOne(
                        expr(&keys[0]),
                        cs.iter()
                            .map(|(ms, n)| {
                                let (m, v) = ms.first().copied().unwrap_or((0, 0));
                                (m, v, n.clone())
                            })
                            .collect(),
                    )
                }
                (Transition::Select { keys, .. }, Some(cs))
                    if keys.len() == 2 && keys.iter().all(|k| k.width() <= 64 && !may_fail(k)) =>
                {
                    LeanNext::SelectTwo(
                        expr(&keys[0]),
                        expr(&keys[1]),
                        cs.iter()
                            .map(|(ms, n)| {
                                let (m0, v0) = ms.first().copied().unwrap_or((0, 0));
                                let (m1, v1) = ms.get(1).copied().unwrap_or((0, 0));
                                ([m0, v0, m1, v1], n.clone())
                            })
                            .collect(),
                    )
                }
                _ => LeanNext::General,
            },
        )
        .collect();
    // verify_checksum over a whole header that nothing but `extract` wrote: summed from the packet
    // bytes
    let mut tracked_headers = vec![];
    let verify = CBlock::new(
        p.verify_checksum
            .body
            .iter()
            .map(|s| match header_checksum(p, s) {
                Some((h, plan)) => {
                    if !tracked_headers.contains(&h) {
                        tracked_headers.push(h);
                    }
                    verify_from_bytes(cx, s, h, plan)
                }
                None => stmt(cx, s),
            })
            .collect(),
        p.verify_checksum.body.iter().any(stmt_may_fail),
    );
    // headers the deparser may emit from the packet's bytes (`unwritten`): their offsets too are
    // reset by every pass
    for h in cx.pristine.unwritten.headers() {
        let mut emitted = false;
        super::writes::walk_all(&p.deparser.body, &mut |s| {
            emitted |= matches!(s, Stmt::Emit { hdr: HeaderRef::Static(x) } if *x as usize == h);
        });
        if emitted && !tracked_headers.contains(&h) {
            tracked_headers.push(h);
        }
    }
    // update_checksum over a whole header that nothing writes afterwards: summed from the emitted
    // bytes
    let mut deferred: Vec<Deferred> = vec![];
    let body = &p.compute_checksum.body;
    let compute = CBlock::new(
        body.iter()
            .enumerate()
            .map(
                |(i, s)| match header_checksum_update(p, s, &body[i + 1..]) {
                    Some((h, f_off, _))
                        if deferred.len() < 64 && !deferred.iter().any(|d| d.header == h) =>
                    {
                        let Stmt::Builtin(Builtin::UpdateChecksum {
                            cond,
                            data,
                            dst: LValue::Static(f),
                            ..
                        }) = s
                        else {
                            unreachable!()
                        };
                        let bit = 1u64 << deferred.len();
                        deferred.push(Deferred {
                            header: h,
                            f_off,
                            f_slot: f.slot as usize,
                            sum: csum16(data),
                            m: mask(f.width),
                        });
                        let c = expr(cond);
                        Box::new(move |e: &Engine, w: &mut Worker| {
                            if c(e, w) != 0 {
                                w.emit.csum_pending |= bit;
                            }
                            Flow::Next
                        }) as SF
                    }
                    _ => stmt(cx, s),
                },
            )
            .collect(),
        body.iter().any(stmt_may_fail),
    );
    Code {
        tracked_headers,
        lean_next,
        select_cases,
        states: p.parser.states.iter().map(|s| block(cx, &s.body)).collect(),
        select_keys,
        verify,
        ingress: block(cx, &p.ingress.body),
        egress: block(cx, &p.egress.body),
        compute,
        deferred,
        deparser: block(cx, &p.deparser.body),
        actions: p.actions.iter().map(|a| block(cx, &a.body)).collect(),
        table_keys: p
            .tables
            .iter()
            .map(|t| {
                t.keys
                    .iter()
                    .map(|k| (k.width <= 64).then(|| expr(&k.expr)))
                    .collect()
            })
            .collect(),
        native_stages: Default::default(),
    }
}

/// Everything the pipeline runs, compiled.
pub(crate) struct Code {
    pub states: Vec<CBlock>,
    /// Per parser state: compiled select keys when all are at most 64 bits.
    pub select_keys: Vec<Option<Vec<XF>>>,
    /// Per parser state: the select cases as (mask, value) per key when they are all exact, masked
    /// or default (ranges and value sets take the interpreter's path).
    pub select_cases: Vec<Option<Vec<(Vec<(u64, u64)>, Next)>>>,
    /// Per parser state: its transition when the parser's hot loop takes it itself.
    pub lean_next: Vec<LeanNext>,
    pub verify: CBlock,
    /// Headers whose extraction offset `verify` reads (reset at the start of every ingress pass).
    pub tracked_headers: Vec<usize>,
    /// `update_checksum`s over a whole header left to the deparser (see [`Deferred`]); bit i of
    /// `Worker::csum_pending` says entry i is due.
    pub deferred: Vec<Deferred>,
    pub ingress: CBlock,
    pub egress: CBlock,
    pub compute: CBlock,
    pub deparser: CBlock,
    pub actions: Vec<CBlock>,
    /// Per table, per key: the compiled key expression when it is at most 64 bits.
    pub table_keys: Vec<Vec<Option<XF>>>,
    /// The whole parser and the pipeline's stages as native functions (set by the native
    /// backend).
    pub native_stages: crate::native::stages::Stages,
}

/// The compiled `verify_checksum` of [`header_checksum`]: from the packet bytes when the header was
/// extracted by the fast path in this pass (its offset recorded), from the fields otherwise.
fn verify_from_bytes(cx: &Cx, s: &Stmt, h: usize, (f_off, len): (usize, usize)) -> SF {
    let slow = stmt(cx, s);
    let Stmt::Builtin(Builtin::VerifyChecksum { cond, field, .. }) = s else {
        return slow;
    };
    let (c, f) = (expr(cond), expr(field));
    Box::new(move |e, w| {
        let at = w.packet.hdr_off.get(h).copied().unwrap_or(crate::NO_OFFSET);
        if at == crate::NO_OFFSET {
            return slow(e, w);
        }
        let Some(bytes) = w.packet.pkt.get(at..at + len) else {
            return slow(e, w);
        };
        let csum = checksum::csum16_without(bytes, f_off) as u64;
        if c(e, w) != 0 && csum != f(e, w) {
            let l = e.prog.std_meta.checksum_error;
            if l.width > 0 {
                w.slots[l.slot as usize] = 1;
            }
        }
        Flow::Next
    })
}
