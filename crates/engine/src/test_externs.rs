//! Externs used by tests only: `extern_shrink` breaks the extern interface on purpose (and the STF
//! harness's `extern_func`, `crate::harness_externs`, comes with it in [`registry`]).

use p4sec_externs::iface::{
    BitBuf, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload,
};

/// `extern void extern_shrink(out bit<W> d);` breaks the interface on purpose: it hands `d` back
/// empty (the engine must count a fault and drop the packet, not write back or panic).
pub struct ExternShrink;

struct ExternShrinkObj;

impl ExternType for ExternShrink {
    fn name(&self) -> &str {
        "extern_shrink"
    }
    fn instantiate(&self, _name: &str, _args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(ExternShrinkObj))
    }
}

impl ExternObject for ExternShrinkObj {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match sig.args.as_slice() {
            [(Dir::Out, _)] => Ok(0),
            _ => Err("extern_shrink takes (out bit<W> d)".into()),
        }
    }
    fn call(
        &self,
        _method: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        _p: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        args.iter_mut().for_each(|a| a.bytes.clear());
        Ok(())
    }
}

/// The externs tests register: the STF harness's and `extern_shrink`.
pub fn registry() -> Vec<Box<dyn ExternType>> {
    let mut r = crate::harness_externs::registry();
    r.push(Box::new(ExternShrink));
    r
}
