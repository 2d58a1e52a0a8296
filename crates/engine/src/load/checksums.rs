//! Checksums compiled at load: `verify_checksum` and `update_checksum` over a whole header computed
//! from its bytes (verified from the packet, deferred to the deparser), and the Internet checksum
//! of a field list as one closure.

use super::context::{mask, may_fail};
use super::expressions::expr;
use crate::engine::XF;
use p4sec_externs::checksum;
use p4sec_ir::*;

/// The `update_checksum` counterpart of [`header_checksum`]: `rest` (the statements after it in the
/// compute control) must not write the header. Returns H, F's byte offset and H's length.
pub(crate) fn header_checksum_update(
    p: &Program,
    s: &Stmt,
    rest: &[Stmt],
) -> Option<(usize, usize, usize)> {
    let Stmt::Builtin(Builtin::UpdateChecksum {
        data,
        dst: LValue::Static(f),
        algo: HashAlgo::Csum16,
        with_payload: false,
        cond,
    }) = s
    else {
        return None;
    };
    if may_fail(cond) {
        return None;
    }
    let (h, f_off, len) = whole_header_checksum(p, data, f)?;
    let slots: Vec<u32> = p.headers[h].fields.iter().map(|x| x.loc.slot).collect();
    rest.iter()
        .all(|s| writes_only_outside(s, &slots))
        .then_some((h, f_off, len))
}

/// Is `data` all fields of one fixed header in order except `f`, a 16-bit field on a 16-bit
/// boundary of a header of whole 16-bit words? Returns the header, F's byte offset and the header's
/// length in bytes.
fn whole_header_checksum(p: &Program, data: &[Expr], f: &Loc) -> Option<(usize, usize, usize)> {
    if f.width != 16 {
        return None;
    }
    let h = p.headers.iter().position(|h| {
        h.fields
            .iter()
            .any(|x| x.loc == *f && x.varbit_len.is_none())
    })?;
    let layout = &p.headers[h];
    if layout
        .fields
        .iter()
        .any(|x| x.varbit_len.is_some() || x.loc.width > 64)
    {
        return None;
    }
    let rest: Vec<Loc> = layout
        .fields
        .iter()
        .map(|x| x.loc)
        .filter(|l| l != f)
        .collect();
    let given: Option<Vec<Loc>> = data
        .iter()
        .map(|d| {
            if let Expr::Load(LValue::Static(l)) = d {
                Some(*l)
            } else {
                None
            }
        })
        .collect();
    if given? != rest {
        return None;
    }
    let bits: u32 = layout.fields.iter().map(|x| x.loc.width).sum();
    let f_bit: u32 = layout
        .fields
        .iter()
        .take_while(|x| x.loc != *f)
        .map(|x| x.loc.width)
        .sum();
    (bits.is_multiple_of(16) && f_bit.is_multiple_of(16)).then_some((
        h,
        (f_bit / 8) as usize,
        (bits / 8) as usize,
    ))
}

/// `verify_checksum(cond, {all fields of header H but F}, F, csum16)` where F is a 16-bit field on
/// a 16-bit boundary of H, and neither the parser nor the verify control writes H's fields other
/// than by `extract`: then H's fields are the bytes it was extracted from, and the checksum is the
/// Internet checksum of those bytes with F's word left out. Returns H and (F's byte offset, H's
/// length in bytes).
pub(crate) fn header_checksum(p: &Program, s: &Stmt) -> Option<(usize, (usize, usize))> {
    let Stmt::Builtin(Builtin::VerifyChecksum {
        data,
        field: Expr::Load(LValue::Static(f)),
        algo: HashAlgo::Csum16,
        with_payload: false,
        ..
    }) = s
    else {
        return None;
    };
    let (h, f_off, len) = whole_header_checksum(p, data, f)?;
    // nothing in the parser or the verify control writes the header except extract
    let slots: Vec<u32> = p.headers[h].fields.iter().map(|x| x.loc.slot).collect();
    let safe = p
        .parser
        .states
        .iter()
        .all(|st| st.body.iter().all(|s| writes_only_outside(s, &slots)))
        && p.verify_checksum
            .body
            .iter()
            .all(|s| writes_only_outside(s, &slots));
    safe.then_some((h, (f_off, len)))
}

/// Does `s` leave the given slots alone (other than by extracting a header)? Conservative.
fn writes_only_outside(s: &Stmt, slots: &[u32]) -> bool {
    match s {
        Stmt::Assign {
            dst: LValue::Static(l),
            ..
        } => !slots.contains(&l.slot),
        Stmt::If { then, else_, .. } => then
            .iter()
            .chain(else_)
            .all(|s| writes_only_outside(s, slots)),
        Stmt::Block { body, .. } | Stmt::Loop { body, .. } => {
            body.iter().all(|s| writes_only_outside(s, slots))
        }
        Stmt::Switch { cases, default, .. } => cases
            .iter()
            .flat_map(|(_, b)| b)
            .chain(default)
            .all(|s| writes_only_outside(s, slots)),
        Stmt::Extract { .. }
        | Stmt::Advance { .. }
        | Stmt::Break(_)
        | Stmt::Exit
        | Stmt::SetValid { .. } => true,
        Stmt::Builtin(Builtin::Verify { .. } | Builtin::VerifyChecksum { .. }) => true,
        _ => false,
    }
}

/// The Internet checksum of the concatenated fields without assembling them: a message read as
/// 16-bit words is congruent, modulo 0xffff, to the sum of its fields each multiplied by 2^(bit
/// distance of its end from the end of the zero-padded message, mod 16), since 2^16 = 1 (mod
/// 0xffff). Folding that sum with end-around carries gives exactly the one's complement sum of the
/// words (zero only when every bit is zero).
pub(crate) fn csum16(data: &[Expr]) -> XF {
    let total: u32 = data.iter().map(|d| d.width()).sum();
    let padded = total.div_ceil(16) * 16;
    let mut end = 0u32;
    let mut konst = 0u64;
    // fields read straight from their slots, split by whether `value << shift` stays below 2^48
    // (then up to 2^16 of them add up without overflowing 64 bits, and no per-field folding is
    // needed)
    let mut short: Vec<(usize, u32, u64)> = vec![];
    let mut long: Vec<(usize, u32, u64)> = vec![];
    let mut computed: Vec<(u32, u64, XF)> = vec![];
    for d in data {
        let wd = d.width();
        end += wd;
        let shift = (padded - end) % 16;
        match d {
            Expr::Small { value, .. } => {
                konst += (checksum::fold(*value & mask(wd)) as u64) << shift
            }
            Expr::Load(LValue::Static(l)) if wd + shift <= 48 => {
                short.push((l.slot as usize, shift, mask(wd)))
            }
            Expr::Load(LValue::Static(l)) => long.push((l.slot as usize, shift, mask(wd))),
            _ => computed.push((shift, mask(wd), expr(d))),
        }
    }
    if short.len() + long.len() + computed.len() >= 1 << 14 {
        // too many fields to add without folding each: fold every one
        long.append(&mut short);
    }
    let end = short
        .iter()
        .chain(&long)
        .map(|f| f.0 + 1)
        .max()
        .unwrap_or(0);
    Box::new(move |e, w| {
        let mut sum = konst;
        let slots = &w.slots[..];
        if end <= slots.len() {
            for &(slot, shift, m) in &short {
                // SAFETY: slot < end <= slots.len()
                sum += (unsafe { *slots.get_unchecked(slot) } & m) << shift;
            }
        } else {
            for &(slot, shift, m) in &short {
                sum += (slots[slot] & m) << shift;
            }
        }
        for &(slot, shift, m) in &long {
            sum += (checksum::fold(slots[slot] & m) as u64) << shift;
        }
        for (shift, m, f) in &computed {
            sum += (checksum::fold(f(e, w) & m) as u64) << shift;
        }
        !checksum::fold(sum) as u64
    })
}
