//! The methods of `esp_sad` a program may call, by name and signature, and the index each
//! resolves to ([`ExternObject::resolve`](crate::iface::ExternObject::resolve)).

use crate::iface::{Dir, MethodSig};

/// Method indexes.
pub(super) const ENCAP: u32 = 0;
pub(super) const DECAP: u32 = 1;
pub(super) const ENCAP_HDR: u32 = 2;
pub(super) const DECAP_SA: u32 = 3;
pub(super) const LIFETIME: u32 = 4;
pub(super) const LIFETIME_SPI: u32 = 5;
pub(super) const ENCAP_SPLIT: u32 = 6;
pub(super) const DECAP_SPLIT: u32 = 7;

/// The method index of a call with signature `sig`.
pub(super) fn resolve(sig: &MethodSig) -> Result<u32, String> {
    match (sig.name.as_str(), sig.args.as_slice()) {
        ("encap", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(ENCAP),
        ("encap", [(Dir::In, 32), (Dir::In, h), (Dir::Out, 8)]) if h % 8 == 0 => Ok(ENCAP_HDR),
        ("decap", [(Dir::In, 32), (Dir::Out, 32), (Dir::Out, 8)]) => Ok(DECAP),
        ("decap_sa", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(DECAP_SA),
        (
            "encap_split",
            [(Dir::In, 32), (Dir::In, h), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)],
        ) if h % 8 == 0 => Ok(ENCAP_SPLIT),
        (
            "decap_split",
            [(Dir::In, 32), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)],
        ) => Ok(DECAP_SPLIT),
        ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(LIFETIME),
        ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8), (Dir::Out, 32)]) => Ok(LIFETIME_SPI),
        (n, _) => Err(format!("esp_sad has no method `{n}` with this signature")),
    }
}
