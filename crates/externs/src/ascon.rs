//! ASCON authenticated encryption: Ascon-AEAD128 as standardized in NIST SP 800-232 (for users) and
//! the earlier ASCON-128 v1.2 that the P4EAD paper implements (to compare with it). Both from
//! RustCrypto.
#![allow(deprecated)]

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// NIST SP 800-232 Ascon-AEAD128.
    Aead128,
    /// ASCON-128 v1.2 (CAESAR / NIST LWC submission).
    V12,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsconError {
    BadKey,
    /// The tag did not verify.
    Tag,
}

/// Encrypt in place; returns the 16-byte tag.
pub fn encrypt(
    v: Variant,
    key: &[u8; 16],
    nonce: &[u8; 16],
    ad: &[u8],
    data: &mut [u8],
) -> Result<[u8; 16], AsconError> {
    match v {
        Variant::Aead128 => {
            use ascon_aead128::aead::{AeadInPlace, KeyInit};
            let c = ascon_aead128::AsconAead128::new(key.into());
            let t = c
                .encrypt_in_place_detached(nonce.into(), ad, data)
                .map_err(|_| AsconError::BadKey)?;
            Ok(t.into())
        }
        Variant::V12 => {
            use ascon_aead::aead::{AeadInPlace, KeyInit};
            let c = ascon_aead::Ascon128::new(key.into());
            let t = c
                .encrypt_in_place_detached(nonce.into(), ad, data)
                .map_err(|_| AsconError::BadKey)?;
            Ok(t.into())
        }
    }
}

/// Decrypt in place after verifying the tag.
pub fn decrypt(
    v: Variant,
    key: &[u8; 16],
    nonce: &[u8; 16],
    ad: &[u8],
    data: &mut [u8],
    tag: &[u8; 16],
) -> Result<(), AsconError> {
    match v {
        Variant::Aead128 => {
            use ascon_aead128::aead::{AeadInPlace, KeyInit};
            let c = ascon_aead128::AsconAead128::new(key.into());
            c.decrypt_in_place_detached(nonce.into(), ad, data, tag.into())
                .map_err(|_| AsconError::Tag)
        }
        Variant::V12 => {
            use ascon_aead::aead::{AeadInPlace, KeyInit};
            let c = ascon_aead::Ascon128::new(key.into());
            c.decrypt_in_place_detached(nonce.into(), ad, data, tag.into())
                .map_err(|_| AsconError::Tag)
        }
    }
}
