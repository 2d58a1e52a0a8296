//! Extern calls made straight from native code ([`DirectCall`]): the generated code computes each
//! narrow argument (at most 64 bits) itself and hands it over as a word, and writes the narrow
//! results back into their slots itself; [`Engine::extern_call_direct`] only turns the words into
//! the extern's bit strings and back, and marshals the wide arguments through their layouts, as
//! [`Engine::extern_call_planned`] does. Same results, same faults as the closures' paths.

use super::externs::check_lengths;
use crate::code::Flow;
use crate::load::pristine::PristineArg;
use crate::{Engine, Worker};
use p4sec_externs::iface::{BitBuf, BoundCall};
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
}

impl DirectCall {
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
    pub(crate) pristine: Option<PristineArg>,
}

/// `v` as the `n` (at most 8) big-endian bytes of `out`, whose length becomes `n`.
#[inline(always)]
fn put_word(out: &mut Vec<u8>, n: usize, v: u64) {
    if out.len() != n {
        out.clear();
        out.resize(n, 0);
    }
    for (k, b) in out.iter_mut().rev().enumerate() {
        *b = (v >> (8 * k)) as u8;
    }
}

/// The value of big-endian `bytes` (at most 8 of them).
#[inline(always)]
fn get_word(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |x, &y| (x << 8) | y as u64)
}

impl Engine {
    /// The call of a [`DirectBound`] site.
    #[inline(always)]
    pub(crate) fn extern_call_direct_bound(&self, w: &mut Worker, b: &DirectBound) -> Flow {
        match b.pristine {
            Some(p) => self.extern_call_bound_pristine(w, b.inst, b.method, &*b.call, p),
            None => self.extern_call_bound(w, b.inst, b.method, &*b.call),
        }
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
        for ((a, b), &v) in dc
            .args
            .iter()
            .zip(w.calls.bitbufs.iter_mut())
            .zip(words.iter())
        {
            b.width = a.width;
            match &a.way {
                Way::Word => {
                    let v = if a.dir == Direction::Out { 0 } else { v };
                    put_word(&mut b.bytes, a.width.div_ceil(8) as usize, v)
                }
                Way::Layout(p) => p.marshal(&w.slots, a.dir != Direction::Out, &mut b.bytes),
            }
        }
        let ret_width = dc.ret.map(|r| match r {
            DirectRet::Word(wd) => wd,
            DirectRet::Wide(l) => l.width,
        });
        if let Some(width) = ret_width {
            w.calls.retbuf.width = width;
            put_word(&mut w.calls.retbuf.bytes, width.div_ceil(8) as usize, 0);
        }
        let r = self
            .invoke_in_place(w, dc.inst, dc.method, n, dc.ret.is_some())
            .and_then(|()| {
                let outs = dc
                    .args
                    .iter()
                    .zip(w.calls.bitbufs.iter())
                    .filter(|(a, _)| a.dir != Direction::In)
                    .map(|(a, b)| (a.width, b));
                check_lengths(outs, ret_width.map(|wd| (wd, &w.calls.retbuf)))
            });
        if let Err(e) = r {
            return self.extern_fault(w, e);
        }
        for ((a, b), v) in dc
            .args
            .iter()
            .zip(w.calls.bitbufs.iter())
            .zip(words.iter_mut())
        {
            if a.dir == Direction::In {
                continue;
            }
            match &a.way {
                Way::Word => *v = get_word(&b.bytes),
                Way::Layout(p) => p.write(&b.bytes, &mut w.slots),
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
}
