//! `p4sec_ascon_encrypt`/`_decrypt` and `p4sec_ascon_seal`/`_open`: ASCON authenticated encryption
//! of fields.

use super::common::{bad, OK, SCRATCH};
use crate::ascon::{self, Variant};
use crate::iface::{BitBuf, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload};

/// `p4sec_ascon_encrypt`/`_decrypt` use all of their AD and data arguments;
/// `p4sec_ascon_seal`/`_open` (`with_len`) only the first `ad_len`/`data_len` bytes and report a
/// status.
pub(super) struct AsconType {
    pub(super) name: &'static str,
    pub(super) decrypt: bool,
    pub(super) with_len: bool,
}

pub(super) struct AsconObj {
    name: &'static str,
    decrypt: bool,
    with_len: bool,
}

/// Status codes of p4sec_ascon_seal/open (p4sec.p4).
pub(super) const ASCON_TAG_FAIL: u64 = 4;
pub(super) const ASCON_BAD_LENGTH: u64 = 5;

impl ExternType for AsconType {
    fn name(&self) -> &str {
        self.name
    }
    fn instantiate(&self, _: &str, _: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(AsconObj {
            name: self.name,
            decrypt: self.decrypt,
            with_len: self.with_len,
        }))
    }
}

pub(super) fn arr16(b: &BitBuf) -> [u8; 16] {
    let mut a = [0u8; 16];
    let n = b.bytes.len().min(16);
    a[16 - n..].copy_from_slice(&b.bytes[b.bytes.len() - n..]);
    a
}

impl ExternObject for AsconObj {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        let a = sig.args.as_slice();
        let ok = match (self.with_len, self.decrypt) {
            (false, true) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::InOut, d), (Dir::In, 128), (Dir::Out, 8)] if ad % 8 == 0 && d % 8 == 0)
            }
            (false, false) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::InOut, d), (Dir::Out, 128)] if ad % 8 == 0 && d % 8 == 0)
            }
            (true, true) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::In, 8), (Dir::InOut, d), (Dir::In, 8), (Dir::In, 128), (Dir::Out, 8)]
                if ad % 8 == 0 && d % 8 == 0)
            }
            (true, false) => {
                matches!(a, [(Dir::In, 8), (Dir::In, 128), (Dir::In, 128), (Dir::In, ad), (Dir::In, 8), (Dir::InOut, d), (Dir::In, 8), (Dir::Out, 128), (Dir::Out, 8)]
                if ad % 8 == 0 && d % 8 == 0)
            }
        };
        if ok {
            Ok(0)
        } else {
            Err(format!(
                "{} needs byte-aligned associated data and data and the signature of p4sec.p4",
                self.name
            ))
        }
    }

    fn call(
        &self,
        _m: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        _p: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        let v = match args[0].as_u64() {
            0 => Variant::Aead128,
            1 => Variant::V12,
            _ => return Err(bad("unknown ASCON variant")),
        };
        let key = arr16(&args[1]);
        let nonce = arr16(&args[2]);
        // (variant, key, nonce, ad, [ad_len,] data, [data_len,] tag, [status]): positions of data,
        // tag, status
        let (d, t, st) = if self.with_len { (5, 7, 8) } else { (4, 5, 6) };
        let (alen, dlen) = if self.with_len {
            (args[4].as_u64() as usize, args[6].as_u64() as usize)
        } else {
            (args[3].bytes.len(), args[4].bytes.len())
        };
        if alen > args[3].bytes.len() || dlen > args[d].bytes.len() {
            args[st].set_u64(ASCON_BAD_LENGTH);
            return Ok(());
        }
        let (head, tail) = args.split_at_mut(4);
        let ad = &head[3].bytes[..alen];
        let tag_in = arr16(&tail[t - 4]);
        let data = &mut tail[d - 4].bytes[..dlen];
        if self.decrypt {
            let tag = tag_in;
            // decrypt a copy: the data stays as it was when the tag does not verify
            let status = SCRATCH.with(|s| {
                let mut buf = s.borrow_mut();
                buf.clear();
                buf.extend_from_slice(data);
                match ascon::decrypt(v, &key, &nonce, ad, &mut buf, &tag) {
                    Ok(()) => {
                        data.copy_from_slice(&buf);
                        OK
                    }
                    Err(_) => ASCON_TAG_FAIL,
                }
            });
            tail[st - 4].set_u64(status);
        } else {
            let tag = ascon::encrypt(v, &key, &nonce, ad, data).map_err(|_| bad("ASCON key"))?;
            tail[t - 4].set_bytes(&tag);
            if self.with_len {
                tail[st - 4].set_u64(OK);
            }
        }
        Ok(())
    }
}
