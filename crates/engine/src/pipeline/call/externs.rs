//! Calls of registered extern methods per packet: through planned layouts, through a call site the
//! extern bound for itself, or the general marshalling path; the payload handed over as a view of
//! the received packet; faults counted and the packet dropped.

use super::planning::PlannedCall;
use crate::code::Flow;
use crate::{Engine, Worker};
use p4sec_externs::iface::{BitBuf, BoundCall, ExternError, ExternObject, Payload};
use p4sec_externs::layout::ArgLayout;
use p4sec_ir::*;

/// Run `f` (an extern method) with the payload as a view of the received packet while it is still
/// there (an extern that only reads it costs no copy; the first write copies it out,
/// `Payload::vec_mut`), and note when it no longer is.
#[inline(always)]
fn with_payload<R>(
    pkt: &[u8],
    payload_at: &mut usize,
    owned: &mut Vec<u8>,
    skip: &mut usize,
    f: impl FnOnce(&mut Payload<'_>) -> R,
) -> R {
    let mut payload = if *payload_at != crate::NOT_IN_PKT {
        Payload::in_packet(pkt, *payload_at, owned)
    } else {
        Payload::owned_from(owned, *skip)
    };
    let r = f(&mut payload);
    if !payload.is_in_packet() {
        *payload_at = crate::NOT_IN_PKT;
        *skip = payload.skip();
    }
    r
}

/// [`ExternObject::call`] through [`with_payload`].
// (the call's arguments and the payload's four places in the worker, each borrowed apart)
#[allow(clippy::too_many_arguments)]
#[inline]
fn call_with_payload(
    obj: &dyn ExternObject,
    m: u32,
    bufs: &mut [BitBuf],
    ret: Option<&mut BitBuf>,
    pkt: &[u8],
    payload_at: &mut usize,
    owned: &mut Vec<u8>,
    skip: &mut usize,
) -> Result<(), ExternError> {
    with_payload(pkt, payload_at, owned, skip, |p| obj.call(m, bufs, ret, p))
}

/// An extern that resized an argument it writes, or the return value, broke the interface: a fault,
/// not a write-back of the wrong bits. `outs`: (width, buffer) of each `out`/`inout` argument.
#[inline(always)]
pub(super) fn check_lengths<'a>(
    mut outs: impl Iterator<Item = (u32, &'a BitBuf)>,
    ret: Option<(u32, &BitBuf)>,
) -> Result<(), ExternError> {
    if let Some((wd, b)) = outs.find(|(wd, b)| b.bytes.len() != wd.div_ceil(8) as usize) {
        return Err(ExternError::Failed(format!(
            "an out argument of {wd} bits came back as {} bytes",
            b.bytes.len()
        )));
    }
    match ret {
        Some((wd, b)) if b.bytes.len() != wd.div_ceil(8) as usize => {
            Err(ExternError::Failed(format!(
                "the return value of {wd} bits came back as {} bytes",
                b.bytes.len()
            )))
        }
        _ => Ok(()),
    }
}

impl Engine {
    /// Call extern method `method` of instance `inst`. `plans[i]`, when there, is argument i's
    /// layout computed at compile time ([`ArgLayout`]); arguments without one are packed and
    /// unpacked the general way.
    pub(crate) fn extern_call(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        args: &[ExternArg],
        plans: &[Option<ArgLayout>],
        ret: Option<&LValue>,
    ) -> Flow {
        let mut bufs = std::mem::take(&mut w.calls.bitbufs);
        if bufs.len() < args.len() {
            bufs.resize_with(args.len(), BitBuf::default);
        }
        for (i, (a, b)) in args.iter().zip(bufs.iter_mut()).enumerate() {
            b.width = a.width;
            match plans.get(i) {
                Some(Some(p)) => p.marshal(&w.slots, a.dir != Direction::Out, &mut b.bytes),
                _ => self.marshal_arg(w, a, b),
            }
        }
        let mut retbuf = std::mem::take(&mut w.calls.retbuf);
        let ret_width = ret.map(|lv| match lv {
            LValue::Static(l) => l.width,
            LValue::Dynamic { base, .. } => base.width,
        });
        if let Some(width) = ret_width {
            retbuf.width = width;
            retbuf.bytes.clear();
            retbuf.bytes.resize(width.div_ceil(8) as usize, 0);
        }
        let r = self
            .invoke(
                w,
                inst,
                method,
                &mut bufs[..args.len()],
                ret_width.map(|_| &mut retbuf),
            )
            .and_then(|()| {
                let outs = args
                    .iter()
                    .zip(bufs.iter())
                    .filter(|(a, _)| a.dir != Direction::In)
                    .map(|(a, b)| (a.width, b));
                check_lengths(outs, ret_width.map(|wd| (wd, &retbuf)))
            });
        if let Err(e) = r {
            w.calls.bitbufs = bufs;
            w.calls.retbuf = retbuf;
            return self.extern_fault(w, e);
        }
        for (i, (a, b)) in args.iter().zip(bufs.iter()).enumerate() {
            if a.dir == Direction::In {
                continue;
            }
            match plans.get(i) {
                Some(Some(p)) => p.write(&b.bytes, &mut w.slots),
                _ => self.write_back_arg(w, a, b),
            }
        }
        if let (Some(lv), Some(_)) = (ret, ret_width) {
            if let Some(l) = self.resolve(w, lv) {
                self.store_bits(
                    w,
                    l,
                    &retbuf.bytes,
                    retbuf.bytes.len() * 8 - l.width as usize,
                );
            }
        }
        w.calls.bitbufs = bufs;
        w.calls.retbuf = retbuf;
        Flow::Next
    }

    /// [`Engine::extern_call`] for a call site whose arguments are all planned: arguments
    /// marshalled straight into the worker's buffers (borrowed in place, not moved out and back),
    /// only `out`/`inout` arguments checked and written back.
    pub(crate) fn extern_call_planned(&self, w: &mut Worker, pc: &PlannedCall) -> Flow {
        let n = pc.args.len();
        if w.calls.bitbufs.len() < n {
            w.calls.bitbufs.resize_with(n, BitBuf::default);
        }
        for ((plan, dir), b) in pc.args.iter().zip(w.calls.bitbufs.iter_mut()) {
            b.width = plan.width();
            plan.marshal(&w.slots, *dir != Direction::Out, &mut b.bytes);
        }
        if let Some(l) = pc.ret {
            w.calls.retbuf.width = l.width;
            w.calls.retbuf.bytes.clear();
            w.calls.retbuf.bytes.resize(l.width.div_ceil(8) as usize, 0);
        }
        let r = self
            .invoke_in_place(w, pc.inst, pc.method, n, pc.ret.is_some())
            .and_then(|()| {
                let outs = pc
                    .args
                    .iter()
                    .zip(w.calls.bitbufs.iter())
                    .filter(|((_, d), _)| *d != Direction::In)
                    .map(|((p, _), b)| (p.width(), b));
                check_lengths(outs, pc.ret.map(|l| (l.width, &w.calls.retbuf)))
            });
        if let Err(e) = r {
            return self.extern_fault(w, e);
        }
        for ((plan, dir), b) in pc.args.iter().zip(w.calls.bitbufs.iter()) {
            if *dir != Direction::In {
                plan.write(&b.bytes, &mut w.slots);
            }
        }
        if let Some(l) = pc.ret {
            let bytes = std::mem::take(&mut w.calls.retbuf.bytes);
            self.store_bits(w, l, &bytes, bytes.len() * 8 - l.width as usize);
            w.calls.retbuf.bytes = bytes;
        }
        Flow::Next
    }

    /// A call site its extern compiled for itself ([`PlannedCall::bind`]): it reads and writes the
    /// slots.
    #[inline(always)]
    pub(crate) fn extern_call_bound(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        b: &dyn BoundCall,
    ) -> Flow {
        let r = with_payload(
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
            |p| b.call(&mut w.slots, p),
        );
        self.trace_extern(w, inst, method);
        match r {
            Ok(()) => Flow::Next,
            Err(e) => self.extern_fault(w, e),
        }
    }

    /// [`Engine::extern_call_bound`] for a call site whose argument is a header no statement can
    /// have written before the call ([`crate::load::pristine`]): vouched for when the header is valid (so
    /// extracted in this pass, which also wrote its offset, or cleared it on the general path), the
    /// fast path recorded its offset, and the payload, still the received packet's bytes, starts
    /// right after it.
    #[inline(always)]
    pub(crate) fn extern_call_bound_pristine(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        b: &dyn BoundCall,
        p: crate::load::pristine::PristineArg,
    ) -> Flow {
        let valid = w.slots.get(p.valid).is_some_and(|v| *v != 0);
        let off = w
            .packet
            .hdr_off
            .get(p.header)
            .copied()
            .unwrap_or(crate::NO_OFFSET);
        let vouch = valid && off != crate::NO_OFFSET && off + p.len == w.packet.payload_at;
        let r = with_payload(
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
            |pl| {
                if vouch {
                    pl.vouch_prefix(p.len);
                }
                b.call(&mut w.slots, pl)
            },
        );
        self.trace_extern(w, inst, method);
        match r {
            Ok(()) => Flow::Next,
            Err(e) => self.extern_fault(w, e),
        }
    }

    /// Call extern method `method` of instance `inst` with the worker's argument buffers in place
    /// (the first `n`, and the return buffer when `with_ret`).
    #[inline]
    pub(super) fn invoke_in_place(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        n: usize,
        with_ret: bool,
    ) -> Result<(), ExternError> {
        let (bufs, retbuf) = (&mut w.calls.bitbufs[..n], &mut w.calls.retbuf);
        let r = call_with_payload(
            &*self.externs.instances[inst],
            self.externs.methods[inst][method as usize],
            bufs,
            with_ret.then_some(retbuf),
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
        );
        self.trace_extern(w, inst, method);
        r
    }

    /// Call extern method `method` of instance `inst` with argument buffers held apart from the
    /// worker.
    fn invoke(
        &self,
        w: &mut Worker,
        inst: usize,
        method: u32,
        bufs: &mut [BitBuf],
        ret: Option<&mut BitBuf>,
    ) -> Result<(), ExternError> {
        let r = call_with_payload(
            &*self.externs.instances[inst],
            self.externs.methods[inst][method as usize],
            bufs,
            ret,
            &w.packet.pkt,
            &mut w.packet.payload_at,
            &mut w.packet.payload,
            &mut w.packet.payload_skip,
        );
        self.trace_extern(w, inst, method);
        r
    }

    #[inline(always)]
    pub(super) fn trace_extern(&self, w: &mut Worker, inst: usize, method: u32) {
        if w.trace.is_some() {
            self.trace_extern_line(w, inst, method);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_extern_line(&self, w: &mut Worker, inst: usize, method: u32) {
        if let Some(t) = w.trace.as_mut() {
            let x = &self.prog.externs[inst];
            t.push(format!(
                "extern {}.{}",
                x.name, x.methods[method as usize].name
            ));
        }
    }

    /// An extern call failed: counted, traced, the packet dropped.
    #[cold]
    pub(super) fn extern_fault(&self, w: &mut Worker, e: ExternError) -> Flow {
        crate::bump(&w.stats.extern_faults);
        if let Some(t) = w.trace.as_mut() {
            t.push(format!("extern fault: {e}"));
        }
        w.fx.drop();
        Flow::Exit
    }
}
