//! `crypto_hash(alg)`: a hash unit whose algorithm is a constructor argument, settled when the
//! program is loaded.

use super::p4sec_hash::{hash_tail, key_bits, BoundHash, BoundTail, Tail};
use crate::hash::HashAlg;
use crate::iface::{
    BitBuf, BoundArg, BoundCall, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload,
};
use crate::layout::ArgLayout;

/// `crypto_hash(alg)`: a hash unit whose algorithm is fixed when the program is loaded.
pub(super) struct CryptoHashType;

pub(super) struct CryptoHash {
    pub(super) alg: HashAlg,
    pub(super) name: String,
}

impl ExternType for CryptoHashType {
    fn name(&self) -> &str {
        "crypto_hash"
    }
    fn instantiate(&self, name: &str, args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        let code = args
            .first()
            .map(|a| a.as_u64())
            .ok_or("crypto_hash needs an algorithm")?;
        let alg = HashAlg::from_code(code)
            .ok_or_else(|| format!("crypto_hash `{name}`: unknown algorithm code {code}"))?;
        Ok(Box::new(CryptoHash {
            alg,
            name: name.to_string(),
        }))
    }
}

impl ExternObject for CryptoHash {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        let who = format!("crypto_hash `{}` ({})", self.name, self.alg.name());
        let (m, o, k, d) = match (sig.name.as_str(), sig.args.as_slice()) {
            ("get", [(Dir::Out, o), (Dir::In, k), (Dir::In, d)]) => (0, *o, *k, *d),
            ("get_packet", [(Dir::Out, o), (Dir::In, k), (Dir::In, d), (Dir::In, 32)]) => {
                (1, *o, *k, *d)
            }
            ("get", _) => return Err(format!("{who}: get takes (out result, in key, in data)")),
            ("get_packet", _) => {
                return Err(format!(
                    "{who}: get_packet takes (out result, in key, in data, in bit<32> offset)"
                ))
            }
            (other, _) => return Err(format!("{who}: no method `{other}`")),
        };
        if o == 0 || o > 512 {
            return Err(format!(
                "{who}: the result must be 1..512 bits wide, not {o}"
            ));
        }
        if k % 8 != 0 || d % 8 != 0 {
            return Err(format!(
                "{who}: key ({k} bits) and data ({d} bits) must be whole bytes"
            ));
        }
        if let Some(need) = key_bits(self.alg) {
            if k != need {
                return Err(format!("{who}: the key must be bit<{need}>, not bit<{k}>"));
            }
        }
        Ok(m)
    }

    fn call(
        &self,
        m: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        let (result, rest) = args.split_at_mut(1);
        let r = &mut result[0];
        let tail = match m {
            1 => Tail::Payload(rest[2].as_u64()),
            _ => Tail::None,
        };
        hash_tail(
            self.alg,
            &rest[0].bytes,
            &rest[1].bytes,
            tail,
            payload,
            &mut r.bytes,
            r.width,
        )
    }

    fn bind(
        &self,
        m: u32,
        args: &[BoundArg<'_>],
        _ret: Option<&ArgLayout>,
    ) -> Option<Box<dyn BoundCall>> {
        match (m, args) {
            (0, [result, key, data]) => {
                BoundHash::bind(self.alg, result, key, data, BoundTail::None)
            }
            (1, [result, key, data, off]) if off.layout.nbytes() <= 8 => BoundHash::bind(
                self.alg,
                result,
                key,
                data,
                BoundTail::PayloadFrom(off.layout.clone()),
            ),
            _ => None,
        }
    }
}
