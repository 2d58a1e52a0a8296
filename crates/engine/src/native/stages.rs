//! The pipeline's stages compiled to machine code, as the engine keeps them to call them directly
//! (no closure, no block around them; `super::enter` runs one): the same functions the stages'
//! blocks wrap, so both paths behave the same. Names nothing of the engine, so that the engine's
//! types can hold it.

use std::any::Any;

/// A native function's address, its context argument's type forgotten (`super::helpers::Entry`).
pub(crate) type NativeFn = unsafe extern "C" fn(*mut u8) -> u64;

/// The native stages of a program (all `None` on the closure backend). The code and what it points
/// at live as long as the engine's blocks (which hold them) and `alive`.
#[derive(Default)]
pub(crate) struct Stages {
    /// The code's module and what the parser's code points at.
    pub(crate) alive: Option<Box<dyn Any + Send + Sync>>,
    /// The whole parser (its end word as `crate::engine::parse_end` says).
    pub(crate) parser: Option<Stage>,
    pub(crate) verify: Option<Stage>,
    pub(crate) ingress: Option<Stage>,
    pub(crate) egress: Option<Stage>,
    /// The compute-checksum control (`super::checksum`).
    pub(crate) compute: Option<Stage>,
    pub(crate) deparser: Option<Stage>,
    /// Verify and ingress when both are native and neither emits (entered with one context).
    pub(crate) verify_ingress: Option<(Stage, Stage)>,
    /// Every stage of the pass, when each is native or empty (entered with one context).
    pub(crate) pass: Option<Pass>,
}

/// The stages of a v1model pass when each of them is native code or has no statements: the
/// pipeline enters them all with one context (`super::PassCx`), the worker's shape checked once.
/// `None`: the stage has no statements (nothing to run).
#[derive(Clone, Copy)]
pub(crate) struct Pass {
    pub(crate) parser: NativeFn,
    pub(crate) verify: Option<NativeFn>,
    pub(crate) ingress: Option<NativeFn>,
    pub(crate) egress: Option<NativeFn>,
    /// The compute-checksum control's function; `None`: the control runs its block (closures,
    /// or nothing when it has no statements).
    pub(crate) compute: Option<NativeFn>,
    pub(crate) deparser: Option<NativeFn>,
    /// The deparser's code emits headers itself (its context carries the output).
    pub(crate) deparser_emits: bool,
    /// The slots and header offsets the stages' code indexes below.
    pub(crate) nslots: usize,
    pub(crate) nheaders: usize,
    /// The resets of a new packet's ingress pass, the parser, verify and ingress as one
    /// function (`super::front`), when it compiled and the program does not use the traffic
    /// manager's fields.
    pub(crate) front: Option<Front>,
    /// `compute` then `deparser` as one function (`super::front::gen_back`), when both are
    /// native (run with the deparser's output attached when `deparser_emits`).
    pub(crate) back: Option<NativeFn>,
}

/// The address of a pass's front (`super::front`): `fn(*mut Ctx, ingress_port, instance_type)
/// -> u64`, its context argument's type forgotten.
pub(crate) type FrontFn = unsafe extern "C" fn(*mut u8, u64, u64) -> u64;

/// The front of a pass, as the pass calls it.
#[derive(Clone, Copy)]
pub(crate) struct Front {
    pub(crate) f: FrontFn,
    /// The front zeroes the slots itself (otherwise its caller does first).
    pub(crate) zeroes: bool,
}

/// One stage's native function.
#[derive(Clone, Copy)]
pub(crate) struct Stage {
    pub(crate) f: NativeFn,
    /// Its context carries the deparser's output.
    pub(crate) emits: bool,
    /// The slots and header offsets its code indexes below.
    pub(crate) nslots: usize,
    pub(crate) nheaders: usize,
}
