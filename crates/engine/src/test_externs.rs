//! Externs used by tests: `extern void extern_func(out bit<32> d, bit<32> s);` copies `s` into `d`
//! (the test extern the reference compiler's `extern-funcs-bmv2` program expects); `extern_shrink`
//! breaks the extern interface on purpose.

use p4sec_externs::iface::{
    BitBuf, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload,
};

pub struct ExternFunc;

struct ExternFuncObj;

impl ExternType for ExternFunc {
    fn name(&self) -> &str {
        "extern_func"
    }
    fn instantiate(&self, _name: &str, _args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(ExternFuncObj))
    }
}

impl ExternObject for ExternFuncObj {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match sig.args.as_slice() {
            [(Dir::Out, a), (Dir::In, b)] if a == b => Ok(0),
            _ => Err("extern_func takes (out bit<W> d, in bit<W> s)".into()),
        }
    }
    fn call(
        &self,
        method: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        _p: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        if method != 0 || args.len() != 2 {
            return Err(ExternError::UnknownMethod(method));
        }
        let s = args[1].bytes.clone();
        args[0].set_bytes(&s);
        Ok(())
    }
}

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

/// The externs the test runner registers.
pub fn registry() -> Vec<Box<dyn ExternType>> {
    vec![Box::new(ExternFunc), Box::new(ExternShrink)]
}
