//! Extern calls made straight from native code ([`DirectCall`]): the generated code computes each
//! narrow argument (at most 64 bits) itself and hands it over as a word, and writes the narrow
//! results back into their slots itself; [`Engine::extern_call_direct`] only turns the words into
//! the extern's bit strings and back, and marshals the wide arguments through their layouts, as
//! [`Engine::extern_call_planned`] does. Same results, same faults as the closures' paths.

use super::externs::check_lengths;
use crate::code::Flow;
use crate::{Engine, Worker};
use p4sec_externs::iface::{BitBuf, BoundCall, ExternError, Payload};
use p4sec_externs::layout::ArgLayout;
use p4sec_ir::*;

/// How one argument of a [`DirectCall`] travels.
pub(crate) enum Way {
    /// As a word of the call's word area: the value going in (for `in`/`inout`, written by the
    /// generated code), the value coming out (for `out`/`inout`, read back by it).
    Word,
    /// Through its layout, marshalled from the slots and written back to them here.
    Layout(ArgLayout),
}

/// One argument of a [`DirectCall`].
pub(crate) struct DirectArg {
    pub(crate) width: u32,
    /// `ceil(width / 8)`: the length of its bit string.
    pub(crate) nbytes: usize,
    pub(crate) dir: Direction,
    pub(crate) way: Way,
}

/// What becomes of a [`DirectCall`]'s return value.
#[derive(Clone, Copy)]
pub(crate) enum DirectRet {
    /// Into the word after the arguments' (the generated code stores it): its width.
    Word(u32),
    /// Into a location wider than 64 bits, stored here.
    Wide(Loc),
}

/// An extern call site the native code makes itself: the extern, and per argument how it travels.
/// The word area the generated code passes holds one word per argument and one for the return
/// value.
pub(crate) struct DirectCall {
    pub(crate) inst: usize,
    pub(crate) method: u32,
    pub(crate) args: Vec<DirectArg>,
    pub(crate) ret: Option<DirectRet>,
    /// Every argument and the return value, if any, a word: the lean path
    /// ([`Engine::extern_call_words`]).
    words_only: bool,
}

impl DirectCall {
    pub(crate) fn new(
        inst: usize,
        method: u32,
        args: Vec<DirectArg>,
        ret: Option<DirectRet>,
    ) -> DirectCall {
        let words_only = args.iter().all(|a| matches!(a.way, Way::Word))
            && !matches!(ret, Some(DirectRet::Wide(_)));
        DirectCall {
            inst,
            method,
            args,
            ret,
            words_only,
        }
    }

    /// How many words the call's word area holds.
    pub(crate) fn words(&self) -> usize {
        self.args.len() + 1
    }
}

/// A call site its extern bound for itself ([`super::PlannedCall::bind`]), called from native code
/// ([`Engine::extern_call_bound`], or [`Engine::extern_call_bound_pristine`] for a header argument
/// the engine may vouch for).
pub(crate) struct DirectBound {
    pub(crate) inst: usize,
    pub(crate) method: u32,
    pub(crate) call: Box<dyn BoundCall>,
    /// The length of the header argument the engine may vouch for ([`crate::load::pristine::PristineArg::len`]), 0 when
    /// there is none.
    pub(crate) vouch_len: usize,
}

/// `v` as the `n` (at most 8) big-endian bytes of `out`, whose length becomes `n`.
#[inline(always)]
fn put_word(out: &mut Vec<u8>, n: usize, v: u64) {
    if out.len() != n {
        out.clear();
        out.resize(n, 0);
    }
    let be = v.to_be_bytes();
    // SAFETY: `out` holds `n` bytes, `n` <= 8 (a word argument is at most 64 bits wide); copies
    // of a constant length, no call to memcpy for the common widths
    unsafe {
        let (src, dst) = (be.as_ptr().add(8 - n.min(8)), out.as_mut_ptr());
        match n {
            0 => {}
            1 => *dst = v as u8,
            2 => std::ptr::copy_nonoverlapping(src, dst, 2),
            4 => std::ptr::copy_nonoverlapping(src, dst, 4),
            8 => std::ptr::copy_nonoverlapping(src, dst, 8),
            _ => std::ptr::copy_nonoverlapping(src, dst, n.min(8)),
        }
    }
}

/// The value of big-endian `bytes` (at most 8 of them).
#[inline(always)]
fn get_word(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |x, &y| (x << 8) | y as u64)
}

/// The call of a [`DirectBound`] site from native code: what [`Engine::extern_call_bound`] and
/// [`Engine::extern_call_bound_pristine`] do up to the fault, in the fewest steps for the common
/// case (the payload still in the packet); a failure is left to the caller
/// ([`Engine::bound_fault`]). `off`, for a site with a header the engine may vouch for
/// ([`DirectBound::vouch_len`]): where the generated code found that header to start in the
/// packet, if it is valid and was extracted by the parser's fast path ([`crate::NO_OFFSET`]
/// otherwise); the vouch holds when the payload, still the received packet's bytes, starts right
/// after it.
#[inline(always)]
pub(crate) fn call_bound(
    w: &mut Worker,
    b: &DirectBound,
    off: Option<usize>,
) -> Result<(), ExternError> {
    let pk = &mut w.packet;
    let at = pk.payload_at;
    if at == crate::NOT_IN_PKT {
        return call_bound_owned(w, b);
    }
    // `vouch_len` is 0 for a site without a header to vouch for. `NO_OFFSET` plus the length
    // wraps to the length less 1, which the payload's offset may equal: the extern trusts a vouch
    // only where the payload starts at least the header's length into the packet
    // (`Payload::prefix_vouched`), so that case is never vouched for
    let vouched = match off {
        Some(off) if off.wrapping_add(b.vouch_len) == at => b.vouch_len,
        _ => 0,
    };
    let mut payload = Payload::in_packet_vouched(&pk.pkt, at, &mut pk.payload, vouched);
    let r = b.call.call(&mut w.slots, &mut payload);
    if !payload.is_in_packet() {
        let skip = payload.skip();
        pk.payload_at = crate::NOT_IN_PKT;
        pk.payload_skip = skip;
    }
    // generated code never runs on a traced packet (its entries hand those to the closures),
    // so only a failure needs the trace
    debug_assert!(w.trace.is_none());
    r
}

/// [`call_bound`] once the payload was copied out of the packet (something rewrote it): nothing
/// to vouch for.
#[cold]
#[inline(never)]
fn call_bound_owned(w: &mut Worker, b: &DirectBound) -> Result<(), ExternError> {
    let pk = &mut w.packet;
    let mut payload = Payload::owned_from(&mut pk.payload, pk.payload_skip);
    let r = b.call.call(&mut w.slots, &mut payload);
    pk.payload_skip = payload.skip();
    r
}

impl Engine {
    /// The call of a [`DirectCall`] site: [`Engine::extern_call_words`] when it can take it, else
    /// [`Engine::extern_call_direct`].
    #[inline(always)]
    pub(crate) fn extern_call_site(
        &self,
        w: &mut Worker,
        dc: &DirectCall,
        words: &mut [u64],
    ) -> Flow {
        if dc.words_only {
            self.extern_call_words(w, dc, words)
        } else {
            self.extern_call_direct(w, dc, words)
        }
    }

    /// [`Engine::extern_call_direct`] for a call site whose arguments and return value are all
    /// words: no layouts, one loop each way.
    fn extern_call_words(&self, w: &mut Worker, dc: &DirectCall, words: &mut [u64]) -> Flow {
        let n = dc.args.len();
        if w.calls.bitbufs.len() < n {
            w.calls.bitbufs.resize_with(n, BitBuf::default);
        }
        for ((a, b), &v) in dc
            .args
            .iter()
            .zip(&mut w.calls.bitbufs[..n])
            .zip(words.iter())
        {
            b.width = a.width;
            put_word(
                &mut b.bytes,
                a.nbytes,
                if a.dir == Direction::Out { 0 } else { v },
            );
        }
        let ret = match dc.ret {
            Some(DirectRet::Word(wd)) => {
                let nb = wd.div_ceil(8) as usize;
                w.calls.retbuf.width = wd;
                put_word(&mut w.calls.retbuf.bytes, nb, 0);
                Some(nb)
            }
            _ => None,
        };
        if let Err(e) = self.invoke_in_place(w, dc.inst, dc.method, n, ret.is_some()) {
            return self.extern_fault(w, e);
        }
        let mut bad = false;
        for ((a, b), v) in dc
            .args
            .iter()
            .zip(&w.calls.bitbufs[..n])
            .zip(words.iter_mut())
        {
            if a.dir != Direction::In {
                if b.bytes.len() != a.nbytes {
                    bad = true;
                    break;
                }
                *v = get_word(&b.bytes);
            }
        }
        if bad || ret.is_some_and(|nb| w.calls.retbuf.bytes.len() != nb) {
            let ret_width = ret.map(|_| w.calls.retbuf.width);
            return self.direct_lengths_fault(w, dc, ret_width);
        }
        if let Some(nb) = ret {
            let bytes = &w.calls.retbuf.bytes[..nb];
            words[n] = get_word(bytes);
        }
        Flow::Next
    }

    /// The fault of a [`DirectBound`] call that failed ([`call_bound`]): traced (when the packet
    /// is), then counted, as [`Engine::extern_call_bound`] does.
    #[cold]
    #[inline(never)]
    pub(crate) fn bound_fault(&self, w: &mut Worker, b: &DirectBound, e: ExternError) -> Flow {
        self.trace_extern(w, b.inst, b.method);
        self.extern_fault(w, e)
    }

    /// Call the extern of `dc` with the narrow arguments in `words` (one per argument, then the
    /// return value's): their bit strings made from the words, the wide ones from the slots, the
    /// extern called on the worker's buffers, then the narrow results (and the return value) put
    /// back into `words` for the generated code to store and the wide ones written to the slots.
    /// A fault is counted and drops the packet ([`Flow::Exit`]), as on the other paths.
    pub(crate) fn extern_call_direct(
        &self,
        w: &mut Worker,
        dc: &DirectCall,
        words: &mut [u64],
    ) -> Flow {
        let n = dc.args.len();
        if w.calls.bitbufs.len() < n {
            w.calls.bitbufs.resize_with(n, BitBuf::default);
        }
        let bufs = &mut w.calls.bitbufs[..n];
        for (i, (a, b)) in dc.args.iter().zip(bufs.iter_mut()).enumerate() {
            b.width = a.width;
            match &a.way {
                Way::Word if a.dir == Direction::Out => put_word(&mut b.bytes, a.nbytes, 0),
                Way::Word => put_word(&mut b.bytes, a.nbytes, words[i]),
                Way::Layout(p) => p.marshal(&w.slots, a.dir != Direction::Out, &mut b.bytes),
            }
        }
        let ret_width = dc.ret.map(|r| match r {
            DirectRet::Word(wd) => wd,
            DirectRet::Wide(l) => l.width,
        });
        if let Some(width) = ret_width {
            w.calls.retbuf.width = width;
            let nb = width.div_ceil(8) as usize;
            if nb <= 8 {
                put_word(&mut w.calls.retbuf.bytes, nb, 0);
            } else {
                w.calls.retbuf.bytes.clear();
                w.calls.retbuf.bytes.resize(nb, 0);
            }
        }
        if let Err(e) = self.invoke_in_place(w, dc.inst, dc.method, n, dc.ret.is_some()) {
            return self.extern_fault(w, e);
        }
        // the results' lengths checked (the narrow ones taken meanwhile: the generated code reads
        // them only when the call went through), then the planned ones written back
        let (mut bad, mut planned) = (false, false);
        for (i, (a, b)) in dc.args.iter().zip(w.calls.bitbufs.iter()).enumerate() {
            if a.dir == Direction::In {
                continue;
            }
            if b.bytes.len() != a.nbytes {
                bad = true;
                break;
            }
            match a.way {
                Way::Word => words[i] = get_word(&b.bytes),
                Way::Layout(_) => planned = true,
            }
        }
        if let Some(wd) = ret_width {
            bad |= w.calls.retbuf.bytes.len() != wd.div_ceil(8) as usize;
        }
        if bad {
            return self.direct_lengths_fault(w, dc, ret_width);
        }
        if planned {
            for (a, b) in dc.args.iter().zip(w.calls.bitbufs.iter()) {
                if let (Way::Layout(p), false) = (&a.way, a.dir == Direction::In) {
                    p.write(&b.bytes, &mut w.slots);
                }
            }
        }
        match dc.ret {
            Some(DirectRet::Word(_)) => words[n] = get_word(&w.calls.retbuf.bytes),
            Some(DirectRet::Wide(l)) => {
                let bytes = std::mem::take(&mut w.calls.retbuf.bytes);
                self.store_bits(w, l, &bytes, bytes.len() * 8 - l.width as usize);
                w.calls.retbuf.bytes = bytes;
            }
            None => {}
        }
        Flow::Next
    }

    /// An extern that resized a result: the fault [`check_lengths`] names, as on the other paths.
    #[cold]
    #[inline(never)]
    fn direct_lengths_fault(
        &self,
        w: &mut Worker,
        dc: &DirectCall,
        ret_width: Option<u32>,
    ) -> Flow {
        let outs = dc
            .args
            .iter()
            .zip(w.calls.bitbufs.iter())
            .filter(|(a, _)| a.dir != Direction::In)
            .map(|(a, b)| (a.width, b));
        let e = match check_lengths(outs, ret_width.map(|wd| (wd, &w.calls.retbuf))) {
            Err(e) => e,
            Ok(()) => ExternError::Failed("a result came back resized".into()),
        };
        self.extern_fault(w, e)
    }
}
