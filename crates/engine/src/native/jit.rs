//! The code generator's setup and the code's lifetime: a Cranelift JIT module for the host
//! (optimising for speed), one function per statement list, and the module's memory freed when
//! the engine that runs the code is dropped. With `P4SEC_JIT_DUMP` set, each function's machine
//! code is printed on stderr as it is compiled (a development aid).

use super::helpers::{Entry, Keep};
use super::stmt::Fx;
use crate::load::compile::Cx;
use cranelift_codegen::inline::{Inline, InlineCommand};
use cranelift_codegen::ir::{types, AbiParam, FuncRef, Signature};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use p4sec_ir::Stmt;

/// A JIT module and what compiling into it reuses.
pub(crate) struct Jit {
    module: Option<JITModule>,
    ctx: cranelift_codegen::Context,
    fctx: FunctionBuilderContext,
    next: usize,
    /// The deparser's deferred checksums every function's emits compute ([`Fx::deferred`]).
    pub(crate) deferred: Vec<(usize, usize, u32)>,
    /// The body of each function [`Jit::build`] compiled (its CLIF as generated), until
    /// [`Jit::finalize`]: what [`Jit::build_front`] inlines.
    bodies: std::collections::HashMap<FuncId, cranelift_codegen::ir::Function>,
}

// SAFETY: after `finalize` the module is only read (function addresses) or freed on drop; the code
// it holds is immutable and may run on any thread.
unsafe impl Send for Jit {}
unsafe impl Sync for Jit {}

impl Jit {
    pub(crate) fn new() -> Result<Jit, String> {
        let mut flags = settings::builder();
        for (k, v) in [
            ("opt_level", "speed"),
            ("use_colocated_libcalls", "false"),
            ("is_pic", "false"),
        ] {
            flags
                .set(k, v)
                .map_err(|e| format!("cranelift flag {k}: {e}"))?;
        }
        let isa = cranelift_native::builder()
            .map_err(|e| format!("no code generator for this machine: {e}"))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("cranelift: {e}"))?;
        let module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        Ok(Jit {
            ctx: module.make_context(),
            module: Some(module),
            fctx: FunctionBuilderContext::new(),
            next: 0,
            deferred: vec![],
            bodies: Default::default(),
        })
    }

    fn module(&mut self) -> &mut JITModule {
        self.module.as_mut().expect("the module lives until drop")
    }

    /// The signature of every native statement list: `extern "C" fn(*mut Ctx) -> u64`.
    pub(crate) fn entry_sig(&self) -> Signature {
        let m = self.module.as_ref().expect("the module lives until drop");
        let mut s = m.make_signature();
        s.params
            .push(AbiParam::new(m.target_config().pointer_type()));
        s.returns.push(AbiParam::new(types::I64));
        s
    }

    /// Compiles one statement list (`verify`: the verify-checksum control's, whose checksums over a
    /// whole extracted header are summed from the packet bytes). An error (or a panic of the code generator) leaves nothing
    /// defined: the caller keeps that list on closures.
    pub(crate) fn function(
        &mut self,
        cx: &Cx,
        body: &[Stmt],
        nslots: usize,
        verify: bool,
    ) -> Result<(FuncId, Keep), String> {
        self.build(cx, nslots, |fx| {
            fx.verify = verify;
            fx.emits = super::stmt::emits(body);
            fx.body(body);
        })
    }

    /// Compiles one function whose code `gen` emits (the builder positioned in its entry block).
    /// Errors as [`Jit::function`].
    pub(crate) fn build(
        &mut self,
        cx: &Cx,
        nslots: usize,
        gen: impl FnOnce(&mut Fx),
    ) -> Result<(FuncId, Keep), String> {
        let sig = self.entry_sig();
        let name = format!("p4_list_{}", self.next);
        self.next += 1;
        let id = self
            .module()
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| e.to_string())?;
        let ptr = self.module().target_config().pointer_type();
        let config = self.module().target_config();
        self.ctx.clear();
        self.ctx.func.signature = sig;
        let keep = {
            let (func, fctx, deferred) = (&mut self.ctx.func, &mut self.fctx, &self.deferred);
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let b = FunctionBuilder::new(func, fctx);
                let mut fx = Fx::new(b, cx, ptr, nslots);
                fx.deferred = deferred.clone();
                gen(&mut fx);
                fx.finish(config)
            }))
            .map_err(|_| {
                // what the builder left half-done is dropped
                self.fctx = FunctionBuilderContext::new();
                self.ctx.clear();
                format!("{name}: the translator failed")
            })?
        };
        // its body as built, for the front to inline (`build_front`)
        self.bodies.insert(id, self.ctx.func.clone());
        self.define(id, &name)?;
        Ok((id, keep))
    }

    /// Compiles the front of a fused pass ([`super::front`]) calling the functions `parser`,
    /// `verify` and `ingress` of this module. Errors as [`Jit::function`].
    pub(crate) fn build_front(
        &mut self,
        plan: &super::front::Plan,
        parser: FuncId,
        verify: Option<FuncId>,
        ingress: Option<FuncId>,
    ) -> Result<FuncId, String> {
        let ptr = self.module().target_config().pointer_type();
        let cc = self.module().target_config().default_call_conv;
        let callees: Vec<FuncId> = [Some(parser), verify, ingress]
            .into_iter()
            .flatten()
            .collect();
        self.chain(
            "p4_front",
            super::front::signature(cc, ptr),
            &callees,
            |b, r| {
                let (v, i) = (verify.map(|_| r[1]), ingress.map(|_| r[r.len() - 1]));
                super::front::gen(b, ptr, plan, r[0], v, i)
            },
        )
    }

    /// Compiles the back of a fused pass ([`super::front::gen_back`]): the compute control's
    /// function `compute`, then the deparser's `deparser` (`compute_may_hide_panic` as
    /// [`super::front::Plan`] says). Errors as [`Jit::function`].
    pub(crate) fn build_back(
        &mut self,
        compute: FuncId,
        deparser: FuncId,
        compute_may_hide_panic: bool,
    ) -> Result<FuncId, String> {
        let ptr = self.module().target_config().pointer_type();
        let sig = self.entry_sig();
        self.chain("p4_back", sig, &[compute, deparser], |b, r| {
            super::front::gen_back(b, ptr, r[0], r[1], compute_may_hide_panic)
        })
    }

    /// One function of signature `sig` whose code `gen` emits, calling the module's functions
    /// `callees` (their references, in that order), whose bodies are then inlined at the calls
    /// (no frame, no call around each; the calls kept if Cranelift's inliner fails).
    fn chain(
        &mut self,
        prefix: &str,
        sig: Signature,
        callees: &[FuncId],
        gen: impl FnOnce(&mut FunctionBuilder, &[FuncRef]),
    ) -> Result<FuncId, String> {
        let name = format!("{prefix}_{}", self.next);
        self.next += 1;
        let id = self
            .module()
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| e.to_string())?;
        self.ctx.clear();
        self.ctx.func.signature = sig;
        // the callees by address (an absolute call: the module's functions need not lie within
        // a 32-bit displacement of each other)
        let (module, func) = (
            self.module.as_mut().expect("the module lives until drop"),
            &mut self.ctx.func,
        );
        let refs: Vec<FuncRef> = callees
            .iter()
            .map(|&f| {
                let r = module.declare_func_in_func(f, func);
                func.dfg.ext_funcs[r].colocated = false;
                r
            })
            .collect();
        let config = self.module().target_config();
        {
            let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            gen(&mut b, &refs);
            b.seal_all_blocks();
            b.finalize(config);
        }
        let pairs: Vec<(FuncRef, FuncId)> = refs.into_iter().zip(callees.iter().copied()).collect();
        let plain = self.ctx.func.clone();
        let inliner = Bodies {
            callees: &pairs,
            bodies: &self.bodies,
        };
        let ctx = &mut self.ctx;
        let inlined =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ctx.inline(inliner)));
        if !matches!(inlined, Ok(Ok(_))) {
            self.fctx = FunctionBuilderContext::new();
            self.ctx.clear();
            self.ctx.func = plain;
        }
        self.define(id, &name)?;
        Ok(id)
    }

    /// Compiles the function in `self.ctx` as `id` (named `name` in errors and in the
    /// `P4SEC_JIT_DUMP` output, a development aid printing its machine code on stderr); the
    /// context cleared for the next function either way.
    fn define(&mut self, id: FuncId, name: &str) -> Result<(), String> {
        let mut ctx = std::mem::replace(&mut self.ctx, cranelift_codegen::Context::new());
        let dump = std::env::var_os("P4SEC_JIT_DUMP").is_some();
        ctx.set_disasm(dump);
        let r = self.module().define_function(id, &mut ctx);
        if dump {
            if let Some(c) = ctx.compiled_code() {
                eprintln!("== {name}\n{}", c.vcode.as_deref().unwrap_or(""));
            }
        }
        ctx.clear();
        self.ctx = ctx;
        r.map_err(|e| format!("{name}: {e:?}"))
    }

    pub(crate) fn finalize(&mut self) -> Result<(), String> {
        self.bodies.clear();
        self.module()
            .finalize_definitions()
            .map_err(|e| e.to_string())
    }

    /// The address of a finalized function (any signature).
    pub(crate) fn address(&self, id: FuncId) -> *const u8 {
        let m = self.module.as_ref().expect("the module lives until drop");
        m.get_finalized_function(id)
    }

    /// The address of a finalized function.
    ///
    /// # Safety
    /// `id` was compiled by [`Jit::function`] and [`Jit::finalize`] has run; the pointer is valid
    /// until `self` is dropped.
    pub(crate) unsafe fn entry(&self, id: FuncId) -> Entry {
        let m = self.module.as_ref().expect("the module lives until drop");
        std::mem::transmute::<*const u8, Entry>(m.get_finalized_function(id))
    }
}

/// The most CLIF instructions of a stage's body the front or the back inlines.
const MAX_INLINED: usize = 20_000;

/// The inliner's view of the module: the body of each callee [`Jit::build_front`] inlines.
struct Bodies<'a> {
    callees: &'a [(FuncRef, FuncId)],
    bodies: &'a std::collections::HashMap<FuncId, cranelift_codegen::ir::Function>,
}

impl Inline for Bodies<'_> {
    fn inline(
        &mut self,
        _: &cranelift_codegen::ir::Function,
        _: cranelift_codegen::ir::Inst,
        _: cranelift_codegen::ir::Opcode,
        callee: FuncRef,
        _: &[cranelift_codegen::ir::Value],
    ) -> InlineCommand<'_> {
        let body = self
            .callees
            .iter()
            .find(|(r, _)| *r == callee)
            .and_then(|(_, id)| self.bodies.get(id));
        match body {
            // a huge stage stays a call (its code not doubled for little gain)
            Some(f) if f.dfg.num_insts() <= MAX_INLINED => InlineCommand::Inline {
                callee: std::borrow::Cow::Borrowed(f),
                visit_callee: false,
            },
            _ => InlineCommand::KeepCall,
        }
    }
}

impl Drop for Jit {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the engine drops the blocks that call this code before its `native` field
            // (declared last), and nothing else holds a pointer into it
            unsafe { m.free_memory() };
        }
    }
}
