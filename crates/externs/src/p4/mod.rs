//! The P4-facing side of the externs: one file per extern binding (the extern types a P4 program
//! declares, most of them in `p4include/p4sec.p4`), and [`registry`], the extern set of a
//! production switch.
//!
//! Adding an extern: write its `ExternType`/`ExternObject` in a new file here, declare the module
//! below and add its type to [`registry`] (see the crate's README, "Adding an extern").

mod common;
mod crypto_hash;
pub mod dfa_matcher;
mod esp_sad;
pub mod ipsec_crypt;
mod p4sec_ascon;
mod p4sec_hash;
#[cfg(test)]
mod tests;

use crate::iface::ExternType;

pub use esp_sad::{decap_ip, EspSad};

pub use common::{NO_SA, OK};

/// All extern types of a production switch (the extern types of `p4sec.p4` and the compatibility
/// externs).
pub fn registry() -> Vec<Box<dyn ExternType>> {
    vec![
        Box::new(esp_sad::EspSadType),
        Box::new(p4sec_hash::HashType {
            name: "p4sec_hash",
            with_payload: false,
        }),
        Box::new(p4sec_hash::HashType {
            name: "p4sec_hash_payload",
            with_payload: true,
        }),
        Box::new(crypto_hash::CryptoHashType),
        Box::new(dfa_matcher::DfaMatcherType),
        Box::new(p4sec_ascon::AsconType {
            name: "p4sec_ascon_encrypt",
            decrypt: false,
            with_len: false,
        }),
        Box::new(p4sec_ascon::AsconType {
            name: "p4sec_ascon_decrypt",
            decrypt: true,
            with_len: false,
        }),
        Box::new(p4sec_ascon::AsconType {
            name: "p4sec_ascon_seal",
            decrypt: false,
            with_len: true,
        }),
        Box::new(ipsec_crypt::IpsecCryptType),
        Box::new(p4sec_ascon::AsconType {
            name: "p4sec_ascon_open",
            decrypt: true,
            with_len: true,
        }),
    ]
}
