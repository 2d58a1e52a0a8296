//! The extern the STF programs of the reference compiler expect of their test harness: `extern
//! void extern_func(out bit<W> d, bit<W> s);` copies `s` into `d` (`extern-funcs-bmv2`). The STF
//! runner (`p4sec stf`) registers it beside the switch's externs; a switch never does.

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

/// The STF harness's externs.
pub fn registry() -> Vec<Box<dyn ExternType>> {
    vec![Box::new(ExternFunc)]
}
