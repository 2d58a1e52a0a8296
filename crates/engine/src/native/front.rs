//! The front half of a fused native pass as one generated function per program: what
//! `Engine::ingress_pass` resets for a new packet (the slots to zero, the tracked headers' offsets,
//! the standard metadata it writes), then the parser, then (when it accepted) verify and ingress,
//! called directly, with the parser error cleared after each control. Rust calls it once per
//! pass ([`super::PassCx::run_fresh`]); every cold case (a parser that did not accept, a panic of a
//! callback) returns to Rust, which finishes the front as `PassCx::run_front` does. The back
//! half likewise: the compute control then the deparser as one function ([`gen_back`]).

use super::helpers::Ctx;
use crate::engine::parse_end::{ACCEPT, PANIC};
use crate::{Worker, NO_OFFSET};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, FuncRef, InstBuilder, MemFlagsData, Signature, Type, Value,
};
use cranelift_frontend::FunctionBuilder;

/// What the front returns when it ran everything (the parser accepted, no panic pending):
/// otherwise the parser's end word (`crate::engine::parse_end`, never this value).
pub(crate) const DONE: u64 = crate::engine::parse_end::NOT_RUN;

/// The most slots the front zeroes itself (with 16-byte stores); a program with more has them
/// zeroed by Rust's `fill` (a `memset` call) before the front runs.
const MAX_ZEROED: usize = 64;

/// What the front writes and calls, fixed when the program is loaded.
pub(crate) struct Plan {
    /// The worker's slots (all zeroed when `zeroes`).
    pub(crate) nslots: usize,
    /// Headers whose offsets are reset to `NO_OFFSET`.
    pub(crate) tracked: Vec<usize>,
    /// (slot, mask) of `ingress_port`, `instance_type` and `packet_length`.
    pub(crate) ingress_port: (usize, u64),
    pub(crate) instance_type: (usize, u64),
    pub(crate) packet_length: (usize, u64),
    /// A closure's panic may be pending after the parser (resp. verify) returned normally (its
    /// code evaluates expressions through their closures): checked with [`np_panicked`].
    pub(crate) parser_may_hide_panic: bool,
    pub(crate) verify_may_hide_panic: bool,
}

impl Plan {
    pub(crate) fn zeroes(&self) -> bool {
        self.nslots <= MAX_ZEROED
    }
}

/// Whether a panic of a callback is pending in the context (1) or not (0).
///
/// # Safety
/// `ctx` is the live context of the calling native function.
pub(crate) unsafe extern "C" fn np_panicked(ctx: *mut Ctx) -> u64 {
    (*ctx).panic.is_some() as u64
}

/// The front's signature.
pub(crate) fn signature(call_conv: cranelift_codegen::isa::CallConv, ptr: Type) -> Signature {
    let mut s = Signature::new(call_conv);
    s.params = vec![
        AbiParam::new(ptr),
        AbiParam::new(types::I64),
        AbiParam::new(types::I64),
    ];
    s.returns = vec![AbiParam::new(types::I64)];
    s
}

/// The front's code, into `b` (an empty function of [`signature`]): `parser`, `verify` and
/// `ingress` are the stages' functions (`None`: no statements).
pub(crate) fn gen(
    b: &mut FunctionBuilder,
    ptr: Type,
    plan: &Plan,
    parser: FuncRef,
    verify: Option<FuncRef>,
    ingress: Option<FuncRef>,
) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let (ctx, port, itype) = {
        let p = b.block_params(entry);
        (p[0], p[1], p[2])
    };
    let flags = MemFlagsData::trusted();
    let slots = b.ins().load(ptr, flags, ctx, Ctx::OFF_SLOTS);
    // the slots to zero
    if plan.zeroes() {
        let bytes = MemFlagsData::new().with_notrap();
        let z = b.ins().iconst(types::I64, 0);
        let zz = b.ins().splat(types::I64X2, z);
        let mut i = 0;
        while i + 2 <= plan.nslots {
            b.ins().store(bytes, zz, slots, (i * 8) as i32);
            i += 2;
        }
        if i < plan.nslots {
            b.ins().store(flags, z, slots, (i * 8) as i32);
        }
    }
    // the tracked headers' offsets
    if !plan.tracked.is_empty() {
        let offs = b.ins().load(ptr, flags, ctx, Ctx::OFF_HDR_OFF);
        let none = b.ins().iconst(types::I64, NO_OFFSET as i64);
        for &h in &plan.tracked {
            b.ins().store(flags, none, offs, (h * 8) as i32);
        }
    }
    // the standard metadata
    let len = b.ins().load(types::I64, flags, ctx, Ctx::OFF_PKT_LEN);
    for ((s, m), v) in [
        (plan.ingress_port, port),
        (plan.instance_type, itype),
        (plan.packet_length, len),
    ] {
        let v = b.ins().band_imm_u(v, m as i64);
        b.ins().store(flags, v, slots, (s * 8) as i32);
    }
    let r = call(b, parser, ctx);
    let accepted = b.ins().icmp_imm_u(IntCC::Equal, r, ACCEPT as i64);
    let (run, cold) = (b.create_block(), b.create_block());
    b.ins().brif(accepted, run, &[], cold, &[r.into()]);
    b.append_block_param(cold, types::I64);
    // a parser that did not accept: its word, for Rust to finish the front
    b.switch_to_block(cold);
    let word = b.block_params(cold)[0];
    b.ins().return_(&[word]);
    b.switch_to_block(run);
    if plan.parser_may_hide_panic {
        hidden_panic(b, ptr, ctx, StopAt::Word(cold));
    }
    // the parser's end (`Engine::native_parser_done` for an accepted packet); the worker and the
    // packet's length read from the context again after each call rather than kept across it
    // (which would take saved registers: the front's prologue and epilogue)
    let w = b.ins().load(ptr, flags, ctx, OFF_W);
    let cursor = b.ins().load(types::I64, flags, ctx, Ctx::OFF_CURSOR);
    b.ins().store(flags, cursor, w, OFF_W_CURSOR);
    let byte = b.ins().ushr_imm_u(cursor, 3);
    let len = b.ins().load(types::I64, flags, ctx, Ctx::OFF_PKT_LEN);
    let at = b.ins().umin(byte, len);
    b.ins().store(flags, at, w, OFF_W_PAYLOAD_AT);
    let zero32 = b.ins().iconst(types::I32, 0);
    if let Some(v) = verify {
        let r = call(b, v, ctx);
        let w = b.ins().load(ptr, flags, ctx, OFF_W);
        b.ins().store(flags, zero32, w, OFF_W_PERR);
        if ingress.is_some() {
            // a panic ends the front (Rust resumes it)
            let panicked = b.ins().icmp_imm_u(IntCC::Equal, r, PANIC as i64);
            let (go, stop) = (b.create_block(), b.create_block());
            b.ins().brif(panicked, stop, &[], go, &[]);
            b.switch_to_block(stop);
            let done = b.ins().iconst(types::I64, DONE as i64);
            b.ins().return_(&[done]);
            b.switch_to_block(go);
            if plan.verify_may_hide_panic {
                hidden_panic(b, ptr, ctx, StopAt::Done(stop));
            }
        }
    }
    if let Some(i) = ingress {
        call(b, i, ctx);
        let w = b.ins().load(ptr, flags, ctx, OFF_W);
        b.ins().store(flags, zero32, w, OFF_W_PERR);
    }
    let done = b.ins().iconst(types::I64, DONE as i64);
    b.ins().return_(&[done]);
}

/// Where [`hidden_panic`] goes when a panic is pending.
enum StopAt {
    /// A block taking the word to return (the parser's end).
    Word(cranelift_codegen::ir::Block),
    /// A block without parameters.
    Done(cranelift_codegen::ir::Block),
}

/// A call to `np_panicked`, leaving for `to` when a panic is pending.
fn hidden_panic(b: &mut FunctionBuilder, ptr: Type, ctx: Value, to: StopAt) {
    let mut s = Signature::new(b.func.signature.call_conv);
    s.params = vec![AbiParam::new(ptr)];
    s.returns = vec![AbiParam::new(types::I64)];
    let sig = b.import_signature(s);
    let f = b.ins().iconst(ptr, np_panicked as *const () as i64);
    let c = b.ins().call_indirect(sig, f, &[ctx]);
    let p = b.inst_results(c)[0];
    let next = b.create_block();
    match to {
        StopAt::Word(blk) => {
            let word = b.ins().iconst(types::I64, PANIC as i64);
            b.ins().brif(p, blk, &[word.into()], next, &[]);
        }
        StopAt::Done(blk) => {
            b.ins().brif(p, blk, &[], next, &[]);
        }
    }
    b.switch_to_block(next);
}

fn call(b: &mut FunctionBuilder, f: FuncRef, ctx: Value) -> Value {
    let c = b.ins().call(f, &[ctx]);
    b.inst_results(c)[0]
}

const OFF_W: i32 = std::mem::offset_of!(Ctx, w) as i32;
const OFF_W_CURSOR: i32 = std::mem::offset_of!(Worker, packet.cursor) as i32;
const OFF_W_PAYLOAD_AT: i32 = std::mem::offset_of!(Worker, packet.payload_at) as i32;
const OFF_W_PERR: i32 = std::mem::offset_of!(Worker, perr) as i32;

/// The back of a fused pass into `b` (an empty function of the stages' signature): the compute
/// control's function `compute` (not emitting), the parser error cleared, then the deparser's
/// `deparser`, whose word is returned; a panic (`compute_may_hide_panic`: checked with
/// [`np_panicked`] too) ends it before the deparser. The caller attaches the deparser's output
/// before (the compute control's code and callbacks never touch it).
pub(crate) fn gen_back(
    b: &mut FunctionBuilder,
    ptr: Type,
    compute: FuncRef,
    deparser: FuncRef,
    compute_may_hide_panic: bool,
) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let ctx = b.block_params(entry)[0];
    let r = call(b, compute, ctx);
    let panicked = b.ins().icmp_imm_u(IntCC::Equal, r, PANIC as i64);
    let (go, stop) = (b.create_block(), b.create_block());
    b.ins().brif(panicked, stop, &[], go, &[]);
    b.switch_to_block(stop);
    let word = b.ins().iconst(types::I64, PANIC as i64);
    b.ins().return_(&[word]);
    b.switch_to_block(go);
    if compute_may_hide_panic {
        hidden_panic(b, ptr, ctx, StopAt::Done(stop));
    }
    let flags = MemFlagsData::trusted();
    let w = b.ins().load(ptr, flags, ctx, OFF_W);
    let zero32 = b.ins().iconst(types::I32, 0);
    b.ins().store(flags, zero32, w, OFF_W_PERR);
    let d = call(b, deparser, ctx);
    b.ins().return_(&[d]);
}
