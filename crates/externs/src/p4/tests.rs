//! Tests of the bound hash call sites against the general call.

use super::crypto_hash::CryptoHash;
use super::p4sec_hash::*;
use crate::hash::HashAlg;
use crate::iface::{BitBuf, BoundArg, Dir, ExternObject, Payload};
use crate::layout::{ArgLayout, Part};

/// A 14-byte header as the engine holds it: slot 10 its first 8 bytes, slot 11 the other 6.
fn header_slots(slots: &mut [u64], hdr: [u8; 14]) {
    slots[10] = u64::from_be_bytes(hdr[..8].try_into().unwrap());
    slots[11] = u64::from_be_bytes([0, 0, hdr[8], hdr[9], hdr[10], hdr[11], hdr[12], hdr[13]]);
}

/// The bit strings the general call receives for these layouts.
fn bit_strings(layouts: &[&ArgLayout], slots: &[u64]) -> Vec<BitBuf> {
    layouts
        .iter()
        .map(|l| {
            let mut b = BitBuf::zero(l.width());
            l.read(slots, &mut b.bytes);
            b
        })
        .collect()
}

/// A bound hash call site does what the general call does with the same bit strings: every
/// algorithm, results narrower and wider than the digest and off the byte grid, data equal to the
/// bytes in front of the payload or not, payload offsets inside and past the payload.
#[test]
fn bound_hash_calls_match_the_general_call() {
    let pkt: Vec<u8> = (0..80u32).map(|i| (i * 37 + 11) as u8).collect();
    let at = 14; // the payload starts after a 14-byte header
    let mut checked = 0;
    for alg in HashAlg::ALL {
        let kbits = key_bits(alg).unwrap_or(128);
        for owidth in [31u32, 64, 256] {
            for same_header in [true, false] {
                for off in [0u64, 5, 200] {
                    // slots: 0 result (up to 4 words), 4.. key words, 10..12 header fields
                    let mut slots = vec![0u64; 16];
                    for (i, s) in slots.iter_mut().enumerate().take(10).skip(4) {
                        *s = 0x0123_4567_89ab_cdefu64.rotate_left(i as u32 * 7);
                    }
                    header_slots(
                        &mut slots,
                        if same_header {
                            pkt[..14].try_into().unwrap()
                        } else {
                            [7; 14]
                        },
                    );
                    slots[12] = off;
                    let result = ArgLayout::new(
                        owidth,
                        &[Part::Field {
                            slot: 0,
                            width: owidth,
                        }],
                    );
                    let Some(result) = result else { continue };
                    let key = ArgLayout::new(
                        kbits,
                        &[Part::Field {
                            slot: 4,
                            width: kbits,
                        }],
                    )
                    .unwrap();
                    let data = ArgLayout::new(
                        112,
                        &[
                            Part::Field {
                                slot: 10,
                                width: 64,
                            },
                            Part::Field {
                                slot: 11,
                                width: 48,
                            },
                        ],
                    )
                    .unwrap();
                    let offl = ArgLayout::new(
                        32,
                        &[Part::Field {
                            slot: 12,
                            width: 32,
                        }],
                    )
                    .unwrap();
                    let arg = |dir, layout| BoundArg {
                        dir,
                        layout,
                        frame_prefix: false,
                    };
                    let obj = CryptoHash {
                        alg,
                        name: "h".into(),
                    };
                    // the general call with the same bit strings
                    let mut bufs = bit_strings(&[&result, &key, &data, &offl], &slots);
                    bufs[0] = BitBuf::zero(owidth);
                    let (mut o1, mut o2) = (vec![], vec![]);
                    let general = obj.call(
                        1,
                        &mut bufs,
                        None,
                        &mut Payload::in_packet(&pkt, at, &mut o1),
                    );
                    let bound = obj
                        .bind(
                            1,
                            &[
                                arg(Dir::Out, &result),
                                arg(Dir::In, &key),
                                arg(Dir::In, &data),
                                arg(Dir::In, &offl),
                            ],
                            None,
                        )
                        .expect("bound");
                    let mut s2 = slots.clone();
                    let r = bound.call(&mut s2, &mut Payload::in_packet(&pkt, at, &mut o2));
                    assert_eq!(general.is_ok(), r.is_ok(), "{alg:?}");
                    let mut got = BitBuf::zero(owidth);
                    result.read(&s2, &mut got.bytes);
                    assert_eq!(
                        got.bytes, bufs[0].bytes,
                        "{alg:?} owidth {owidth} same_header {same_header} off {off}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 150, "{checked}");
    // p4sec_hash_payload (the algorithm a constant argument), over the frame as received or a
    // changed header
    for alg in HashAlg::ALL {
        let kbits = key_bits(alg).unwrap_or(128);
        for same_header in [true, false] {
            let mut slots = vec![0u64; 16];
            for (i, s) in slots.iter_mut().enumerate().take(10).skip(4) {
                *s = 0x0f1e_2d3c_4b5a_6978u64.rotate_left(i as u32 * 5);
            }
            header_slots(
                &mut slots,
                if same_header {
                    pkt[..14].try_into().unwrap()
                } else {
                    [9; 14]
                },
            );
            let result = ArgLayout::new(64, &[Part::Field { slot: 0, width: 64 }]).unwrap();
            let code = ArgLayout::new(
                8,
                &[Part::Const {
                    value: alg.code() as u64,
                    width: 8,
                }],
            )
            .unwrap();
            let key = ArgLayout::new(
                kbits,
                &[Part::Field {
                    slot: 4,
                    width: kbits,
                }],
            )
            .unwrap();
            let data = ArgLayout::new(
                112,
                &[
                    Part::Field {
                        slot: 10,
                        width: 64,
                    },
                    Part::Field {
                        slot: 11,
                        width: 48,
                    },
                ],
            )
            .unwrap();
            let obj = HashObj { with_payload: true };
            let mut bufs = bit_strings(&[&result, &code, &key, &data], &slots);
            let (mut o1, mut o2) = (vec![], vec![]);
            obj.call(
                0,
                &mut bufs,
                None,
                &mut Payload::in_packet(&pkt, 14, &mut o1),
            )
            .unwrap();
            let a = |dir, layout| BoundArg {
                dir,
                layout,
                frame_prefix: false,
            };
            let bound = obj
                .bind(
                    0,
                    &[
                        a(Dir::Out, &result),
                        a(Dir::In, &code),
                        a(Dir::In, &key),
                        a(Dir::In, &data),
                    ],
                    None,
                )
                .expect("bound");
            let mut s2 = slots.clone();
            bound
                .call(&mut s2, &mut Payload::in_packet(&pkt, 14, &mut o2))
                .unwrap();
            let mut got = BitBuf::zero(64);
            result.read(&s2, &mut got.bytes);
            assert_eq!(
                got.bytes, bufs[0].bytes,
                "{alg:?} same_header {same_header}"
            );
        }
    }
    // p4sec_hash_payload: the algorithm is a constant argument; a field algorithm is not bound
    let obj = HashObj { with_payload: true };
    let r = ArgLayout::new(64, &[Part::Field { slot: 0, width: 64 }]).unwrap();
    let k = ArgLayout::new(
        128,
        &[Part::Field {
            slot: 4,
            width: 128,
        }],
    )
    .unwrap();
    let d = ArgLayout::new(8, &[Part::Field { slot: 6, width: 8 }]).unwrap();
    let alg_const = ArgLayout::new(
        8,
        &[Part::Const {
            value: HashAlg::SipHash24.code() as u64,
            width: 8,
        }],
    )
    .unwrap();
    let alg_field = ArgLayout::new(8, &[Part::Field { slot: 7, width: 8 }]).unwrap();
    let a = |dir, layout| BoundArg {
        dir,
        layout,
        frame_prefix: false,
    };
    assert!(obj
        .bind(
            0,
            &[
                a(Dir::Out, &r),
                a(Dir::In, &alg_const),
                a(Dir::In, &k),
                a(Dir::In, &d)
            ],
            None
        )
        .is_some());
    assert!(obj
        .bind(
            0,
            &[
                a(Dir::Out, &r),
                a(Dir::In, &alg_field),
                a(Dir::In, &k),
                a(Dir::In, &d)
            ],
            None
        )
        .is_none());
}

/// Where the engine vouches for the data argument ([`Payload::vouch_prefix`] on a `frame_prefix`
/// argument), a bound `p4sec_hash_payload` hashes the frame's bytes without comparing them with the
/// argument: shown here with an argument that differs from them (which the engine never vouches
/// for). Without the vouch, with a vouch for another length, or on an argument not marked
/// `frame_prefix`, the argument is what is hashed.
#[test]
fn a_vouched_data_argument_is_read_from_the_frame() {
    let pkt: Vec<u8> = (0..64u32).map(|i| (i * 41 + 3) as u8).collect();
    for alg in [HashAlg::SipHash24, HashAlg::HmacSha256, HashAlg::Blake2b] {
        let kbits = key_bits(alg).unwrap_or(128);
        let mut slots = vec![0u64; 16];
        for (i, s) in slots.iter_mut().enumerate().take(10).skip(4) {
            *s = 0x1122_3344_5566_7788u64.rotate_left(i as u32 * 3);
        }
        header_slots(&mut slots, [5; 14]);
        let result = ArgLayout::new(64, &[Part::Field { slot: 0, width: 64 }]).unwrap();
        let code = ArgLayout::new(
            8,
            &[Part::Const {
                value: alg.code() as u64,
                width: 8,
            }],
        )
        .unwrap();
        let key = ArgLayout::new(
            kbits,
            &[Part::Field {
                slot: 4,
                width: kbits,
            }],
        )
        .unwrap();
        let data = ArgLayout::new(
            112,
            &[
                Part::Field {
                    slot: 10,
                    width: 64,
                },
                Part::Field {
                    slot: 11,
                    width: 48,
                },
            ],
        )
        .unwrap();
        let obj = HashObj { with_payload: true };
        let digest_of = |header: &[u8]| {
            let mut bufs = bit_strings(&[&result, &code, &key, &data], &slots);
            bufs[3].bytes = header.to_vec();
            let mut o = vec![];
            obj.call(
                0,
                &mut bufs,
                None,
                &mut Payload::in_packet(&pkt, 14, &mut o),
            )
            .unwrap();
            bufs[0].bytes.clone()
        };
        let (of_frame, of_argument) = (digest_of(&pkt[..14]), digest_of(&[5; 14]));
        assert_ne!(of_frame, of_argument);
        for (marked, vouch, want) in [
            (true, Some(14), &of_frame),
            (true, None, &of_argument),
            (true, Some(13), &of_argument),
            (false, Some(14), &of_argument),
        ] {
            let a = |dir, layout, frame_prefix| BoundArg {
                dir,
                layout,
                frame_prefix,
            };
            let bound = obj
                .bind(
                    0,
                    &[
                        a(Dir::Out, &result, false),
                        a(Dir::In, &code, false),
                        a(Dir::In, &key, false),
                        a(Dir::In, &data, marked),
                    ],
                    None,
                )
                .expect("bound");
            let (mut s2, mut o) = (slots.clone(), vec![]);
            let mut payload = Payload::in_packet(&pkt, 14, &mut o);
            if let Some(n) = vouch {
                payload.vouch_prefix(n);
            }
            bound.call(&mut s2, &mut payload).unwrap();
            let mut got = BitBuf::zero(64);
            result.read(&s2, &mut got.bytes);
            assert_eq!(&got.bytes, want, "{alg:?} marked {marked} vouch {vouch:?}");
        }
    }
}

/// The registry holds each extern type once, under the name P4 programs declare.
#[test]
fn the_registry_names_each_extern_type_once() {
    let reg = super::registry();
    let mut names: Vec<&str> = reg.iter().map(|t| t.name()).collect();
    assert!(
        names.contains(&"esp_sad")
            && names.contains(&"dfa_matcher")
            && names.contains(&"ipsec_crypt"),
        "{names:?}"
    );
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "duplicate extern type names");
}
