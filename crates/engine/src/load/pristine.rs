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

use p4sec_ir::Direction;
use p4sec_ir::{words_for, Builtin, Expr, ExternArg, HeaderRef, LValue, Program, Stmt};
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
        let bodies = p
            .parser
            .states
            .iter()
            .map(|s| &s.body)
            .chain([
                &p.verify_checksum.body,
                &p.ingress.body,
                &p.egress.body,
                &p.compute_checksum.body,
                &p.deparser.body,
            ])
            .chain(p.actions.iter().map(|a| &a.body));
        for b in bodies {
            walk_all(b, &mut visit);
        }
        if cands.is_empty() {
            return Pristine::default();
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
        }
    }
}

/// `a` is header `h`'s fields in wire order, whole bytes and fixed width: (h, its length in bytes).
fn whole_header(p: &Program, a: &ExternArg) -> Option<(usize, usize)> {
    if a.dir != Direction::In || a.width == 0 || a.width % 8 != 0 {
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

/// Calls `f` on every statement of `b`, nested ones included.
fn walk_all<'p>(b: &'p [Stmt], f: &mut impl FnMut(&'p Stmt)) {
    for s in b {
        f(s);
        match s {
            Stmt::If { then, else_, .. } => {
                walk_all(then, f);
                walk_all(else_, f);
            }
            Stmt::Switch { cases, default, .. } => {
                for (_, c) in cases {
                    walk_all(c, f);
                }
                walk_all(default, f);
            }
            Stmt::Block { body, .. } | Stmt::Loop { body, .. } => walk_all(body, f),
            _ => {}
        }
    }
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

/// What a statement may write, as far as the analysis can tell.
enum Writes<'s> {
    Nothing,
    Locs(Vec<&'s LValue>),
    Header(&'s HeaderRef),
    /// Anything (unknown, or a run-time index).
    Everything,
}

fn writes(s: &Stmt) -> Writes<'_> {
    match s {
        Stmt::Assign { dst, .. } => Writes::Locs(vec![dst]),
        Stmt::SetValid { hdr, .. }
        | Stmt::CopyHeader { dst: hdr, .. }
        | Stmt::Extract { hdr, .. } => Writes::Header(hdr),
        Stmt::Advance { .. } | Stmt::Emit { .. } | Stmt::Break(_) | Stmt::Exit => Writes::Nothing,
        Stmt::ExternCall { args, ret, .. } => Writes::Locs(
            args.iter()
                .filter(|a| a.dir != Direction::In)
                .flat_map(|a| a.dsts.iter())
                .chain(ret)
                .collect(),
        ),
        Stmt::Builtin(b) => match b {
            Builtin::Hash { dst, .. }
            | Builtin::UpdateChecksum { dst, .. }
            | Builtin::RegisterRead { dst, .. }
            | Builtin::MeterExecute { dst, .. }
            | Builtin::DirectMeterRead { dst, .. }
            | Builtin::Random { dst, .. } => Writes::Locs(vec![dst]),
            // standard metadata only (`checksum_error`, `egress_spec`, `mcast_grp`), or nothing
            Builtin::Verify { .. }
            | Builtin::VerifyChecksum { .. }
            | Builtin::MarkToDrop
            | Builtin::RegisterWrite { .. }
            | Builtin::CounterCount { .. }
            | Builtin::DirectCounterCount { .. }
            | Builtin::Clone { .. }
            | Builtin::Resubmit { .. }
            | Builtin::Recirculate { .. }
            | Builtin::Truncate { .. }
            | Builtin::Digest { .. }
            | Builtin::LogMsg { .. }
            | Builtin::Assert { .. } => Writes::Nothing,
        },
        // the control flow statements are walked by the analysis itself
        Stmt::If { .. }
        | Stmt::Switch { .. }
        | Stmt::Block { .. }
        | Stmt::Loop { .. }
        | Stmt::ApplyTable { .. }
        | Stmt::CallAction { .. } => Writes::Everything,
    }
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
mod tests {
    use super::Pristine;
    use crate::{Engine, Outputs, Worker};
    use p4sec_externs::hash::{self, HashAlg};
    use std::sync::Arc;

    const KEY: u128 = 0x0001_0203_0405_0607_0809_0a0b_0c0d_0e0f;

    /// A program hashing header `h` and the payload with SipHash-2-4 in action `a` of table `t`,
    /// the digest's top 48 bits then written into `h.src`; the placeholders put writes before and
    /// after the call.
    fn program(parser_extra: &str, other: &str, before: &str, apply: &str, egress: &str) -> String {
        r#"#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
header h_t { bit<48> dst; bit<48> src; bit<16> type; }
header g_t { bit<32> x; }
struct hs { h_t h; g_t g; }
struct m { bit<64> d; bit<8> flag; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); PARSER_EXTRA transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action other() { OTHER }
    action a(bit<128> k) {
        BEFORE
        p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, k, hdr.h);
        hdr.h.src = meta.d[63:16];
    }
    table t0 { key = { sm.ingress_port : exact; } actions = { other; } default_action = other(); }
    table t { key = { sm.ingress_port : exact; } actions = { a; } default_action = a(KEY); }
    apply { sm.egress_spec = 1; APPLY }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { EGRESS } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.g); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#
        .replace("PARSER_EXTRA", parser_extra)
        .replace("OTHER", other)
        .replace("BEFORE", before)
        .replace("APPLY", apply)
        .replace("EGRESS", egress)
        .replace("KEY", &format!("128w{KEY:#x}"))
    }

    /// `h.src` after the call: the top 48 bits of SipHash-2-4 over `header ++ payload` (the
    /// digest's first 8 bytes as a number).
    fn hashed(header: &mut [u8; 14], payload: &[u8]) {
        let msg = [&header[..], payload].concat();
        let mut d = [0u8; 8];
        hash::compute(HashAlg::SipHash24, &KEY.to_be_bytes(), &msg, &mut d).unwrap();
        header[6..12].copy_from_slice(&d[..6]);
    }

    struct Case {
        name: &'static str,
        src: String,
        /// How many call sites the analysis vouches for.
        vouched: usize,
        /// The second header is extracted too (so `h` is not right in front of the payload).
        with_g: bool,
        /// The header as the program changes it before the first call.
        before: fn(&mut [u8; 14]),
        calls: usize,
        after: fn(&mut [u8; 14]),
    }

    fn cases() -> Vec<Case> {
        let none: fn(&mut [u8; 14]) = |_| {};
        let case = |name, src, vouched, before, calls, after| Case {
            name,
            src,
            vouched,
            with_g: false,
            before,
            calls,
            after,
        };
        let mut v = vec![
            case(
                "clean",
                program("", "", "", "t.apply();", ""),
                1,
                none,
                1,
                none,
            ),
            case(
                "metadata written before",
                program("", "", "meta.flag = 8w1;", "t.apply();", ""),
                1,
                none,
                1,
                none,
            ),
            case(
                "header written after, in egress",
                program("", "", "", "t.apply();", "hdr.h.dst = 48w3;"),
                1,
                none,
                1,
                |h| h[..6].copy_from_slice(&[0, 0, 0, 0, 0, 3]),
            ),
            case(
                "written before, same action",
                program("", "", "hdr.h.dst = 48w1;", "t.apply();", ""),
                0,
                |h| h[..6].copy_from_slice(&[0, 0, 0, 0, 0, 1]),
                1,
                none,
            ),
            case(
                "written by an earlier table",
                program(
                    "",
                    "hdr.h.type = 16w0x0800;",
                    "",
                    "t0.apply(); t.apply();",
                    "",
                ),
                0,
                |h| h[12..].copy_from_slice(&[8, 0]),
                1,
                none,
            ),
            case(
                "table applied twice, written after the call",
                program("", "", "", "t.apply(); t.apply();", ""),
                0,
                none,
                2,
                none,
            ),
            case(
                "written in one branch",
                program(
                    "",
                    "",
                    "",
                    "if (sm.ingress_port == 0) { hdr.h.dst = 48w2; } t.apply();",
                    "",
                ),
                0,
                |h| h[..6].copy_from_slice(&[0, 0, 0, 0, 0, 2]),
                1,
                none,
            ),
            case(
                "written in the parser",
                program("hdr.h.type = 16w7;", "", "", "t.apply();", ""),
                0,
                |h| h[12..].copy_from_slice(&[0, 7]),
                1,
                none,
            ),
            case(
                "made valid before",
                program("", "", "hdr.h.setValid();", "t.apply();", ""),
                0,
                none,
                1,
                none,
            ),
            case(
                "an extern's out argument before",
                program(
                    "",
                    "",
                    "p4sec_hash(hdr.h.dst, p4sec_hash_alg_t.CRC32, k, hdr.h.type);",
                    "t.apply();",
                    "",
                ),
                0,
                |h| {
                    let mut c = [0u8; 4];
                    hash::compute(HashAlg::Crc32, &[], &h[12..14], &mut c).unwrap();
                    h[..6].copy_from_slice(&[0, 0, c[0], c[1], c[2], c[3]]);
                },
                1,
                none,
            ),
        ];
        // vouched for by the analysis, but not at run time: `g` lies between `h` and the payload
        v.push(Case {
            with_g: true,
            ..case(
                "another header in between",
                program("p.extract(hdr.g);", "", "", "t.apply();", ""),
                1,
                none,
                1,
                none,
            )
        });
        v
    }

    /// Every case: the analysis vouches for exactly the clean call sites, and the digest in the
    /// frame that leaves is the hash of the header as the program left it before the call, never of
    /// the bytes received.
    #[test]
    fn only_headers_nothing_wrote_are_vouched_for_and_digests_follow_the_writes() {
        let frame: Vec<u8> = (0..60u32).map(|i| (i * 29 + 5) as u8).collect();
        for c in cases() {
            let prog = p4sec_frontend::compile_str("pristine.p4", &c.src, &Default::default())
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(Pristine::analyse(&prog).len(), c.vouched, "{}", c.name);
            let e = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry())
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let mut w = Worker::new(&e);
            let mut out = Outputs::default();
            // twice: the second packet must not see anything of the first
            for _ in 0..2 {
                out.clear();
                e.process(&mut w, 0, &frame, &mut out);
                let (port, got) = out
                    .iter()
                    .next()
                    .unwrap_or_else(|| panic!("{}: dropped", c.name));
                assert_eq!(port, 1, "{}", c.name);
                let mut h: [u8; 14] = frame[..14].try_into().unwrap();
                let rest = if c.with_g { &frame[18..] } else { &frame[14..] };
                (c.before)(&mut h);
                for _ in 0..c.calls {
                    hashed(&mut h, rest);
                }
                (c.after)(&mut h);
                let mut want = h.to_vec();
                if c.with_g {
                    want.extend_from_slice(&frame[14..18]);
                }
                want.extend_from_slice(rest);
                assert_eq!(got, &want[..], "{}", c.name);
            }
        }
    }

    /// Frames of each length through `src`: the header that leaves carries the digest over itself
    /// as received and the payload, and the payload leaves unchanged.
    fn check_frames(src: &str, lens: &[usize]) {
        let prog = p4sec_frontend::compile_str("pristine.p4", src, &Default::default()).unwrap();
        let e = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry()).unwrap();
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        for &len in lens {
            let frame: Vec<u8> = (0..len as u32).map(|i| (i * 13 + 1) as u8).collect();
            out.clear();
            e.process(&mut w, 0, &frame, &mut out);
            let (_, got) = out.iter().next().expect("forwarded");
            let mut h: [u8; 14] = frame[..14].try_into().unwrap();
            hashed(&mut h, &frame[14..]);
            assert_eq!(&got[..14], &h[..], "length {len}");
            assert_eq!(&got[14..], &frame[14..], "length {len}");
        }
    }

    /// A short frame (the header extracted, nothing after it) and a frame the parser cannot extract
    /// the header from: vouched for or not, the digest is the one over what the program sees.
    #[test]
    fn frames_of_every_length_get_the_digest_of_what_the_program_sees() {
        check_frames(
            &program("", "", "", "t.apply();", ""),
            &[14, 15, 21, 22, 23, 64, 200],
        );
    }

    /// The offset the parser recorded for a header stays in the worker from one packet to the next:
    /// a packet that does not extract the header (and whose payload happens to start where the
    /// header would end) must not be vouched for by it. The digest lands in a header emitted on
    /// both paths.
    #[test]
    fn a_header_not_extracted_in_this_pass_is_never_vouched_for() {
        let src = r#"#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>
header h_t { bit<48> dst; bit<48> src; bit<16> type; }
header g_t { bit<32> x; }
struct hs { h_t h; g_t g; }
struct m { bit<64> d; }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { transition select(sm.ingress_port) { 0: ph; default: pg; } }
    state ph { p.extract(hdr.h); transition accept; }
    state pg { p.extract(hdr.g); p.advance(80); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    action a(bit<128> k) {
        p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, k, hdr.h);
        hdr.g.setValid();
        hdr.g.x = meta.d[63:32];
    }
    table t { key = { sm.ingress_port : exact; } actions = { a; } default_action = a(128w0x0f0e0d0c0b0a09080706050403020100); }
    apply { sm.egress_spec = 1; t.apply(); }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); p.emit(hdr.g); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;
        let prog = p4sec_frontend::compile_str("pristine.p4", src, &Default::default()).unwrap();
        assert_eq!(Pristine::analyse(&prog).len(), 1);
        let e = Engine::new(Arc::new(prog), &p4sec_externs::p4::registry()).unwrap();
        let mut w = Worker::new(&e);
        let mut out = Outputs::default();
        let key: Vec<u8> = (0..16u8).rev().collect();
        let frame: Vec<u8> = (0..40u32).map(|i| (i * 31 + 7) as u8).collect();
        for port in [0u32, 1, 0, 1] {
            out.clear();
            e.process(&mut w, port, &frame, &mut out);
            let (_, got) = out.iter().next().expect("forwarded");
            // port 0: h is the frame's first 14 bytes; port 1: h is invalid (its fields zero) and
            // the payload starts at 14 all the same
            let header = if port == 0 {
                frame[..14].to_vec()
            } else {
                vec![0; 14]
            };
            let mut d = [0u8; 8];
            hash::compute(
                HashAlg::SipHash24,
                &key,
                &[&header[..], &frame[14..]].concat(),
                &mut d,
            )
            .unwrap();
            let g_at = if port == 0 { 14 } else { 0 };
            assert_eq!(&got[g_at..g_at + 4], &d[..4], "port {port}");
        }
    }

    /// A key written in the program as a 128-bit constant (planned as two 64-bit pieces, most
    /// significant first): the digest is the one under that key, on every path.
    #[test]
    fn a_constant_wide_key_hashes_under_its_value() {
        let src = program("", "", "", "t.apply();", "").replace(
            "p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, k, hdr.h);",
            &format!(
                "p4sec_hash_payload(meta.d, p4sec_hash_alg_t.SIPHASH_2_4, 128w{KEY:#x}, hdr.h);"
            ),
        );
        assert!(src.contains("128w0x102030405060708090a0b0c0d0e0f, hdr.h"));
        check_frames(&src, &[14, 60, 300]);
    }
}
