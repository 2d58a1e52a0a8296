//! `esp_sad`: the ESP security association database extern (RFC 4303 tunnel mode): SA slots
//! installed by the control plane (`add_sa`, undone by `del_sa`; `sa_stats`), and `encap`/`decap`
//! of the packet's payload. This module is the extern type and object; the work is in the
//! submodules: `sa_table` (the SA slots and the SPI index), `methods` (the methods' signatures),
//! `packet` (encapsulation and decapsulation, the general call), `bound` (bound call sites) and
//! `control` (the control API).

mod bound;
mod control;
mod methods;
mod packet;
mod sa_table;

use crate::esp::{esp_of_ip, EspError, Sa};
use crate::iface::{
    BitBuf, BoundArg, BoundCall, ExternError, ExternObject, ExternType, MethodSig, Payload,
};
use crate::layout::ArgLayout;
use sa_table::Sad;
use std::sync::Arc;

pub(super) struct EspSadType;

impl ExternType for EspSadType {
    fn name(&self) -> &str {
        "esp_sad"
    }
    fn instantiate(&self, _name: &str, args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        let size = args
            .first()
            .map(|a| a.as_u64())
            .ok_or("esp_sad needs a size")?;
        if size == 0 || size > 1 << 20 {
            return Err(format!("esp_sad size {size} is out of range (1..2^20)"));
        }
        Ok(Box::new(EspSad {
            db: Arc::new(Sad::new(size)),
        }))
    }
    fn undo_op(&self, op: &str) -> Option<&'static str> {
        (op == "add_sa").then_some("del_sa")
    }
}

/// One `esp_sad` instance: its SA database, shared with the call sites it binds
/// ([`ExternObject::bind`]).
pub struct EspSad {
    db: Arc<Sad>,
}

impl ExternObject for EspSad {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        methods::resolve(sig)
    }

    fn call(
        &self,
        method: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        packet::call(&self.db, method, args, payload)
    }

    fn bind(
        &self,
        method: u32,
        args: &[BoundArg<'_>],
        _ret: Option<&ArgLayout>,
    ) -> Option<Box<dyn BoundCall>> {
        bound::bind(&self.db, method, args)
    }

    fn control(&self, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
        control::control(&self.db, op, args)
    }

    fn drain_events(&self) -> Vec<String> {
        self.db.drain_events()
    }
}

/// Decapsulate a whole outer IP packet (helper for tests and tools).
pub fn decap_ip(sa: &Sa, packet: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
    sa.decapsulate(esp_of_ip(packet)?, out)
}

#[cfg(test)]
mod tests {
    use super::methods::{
        DECAP, DECAP_SPLIT, ENCAP, ENCAP_HDR, ENCAP_SPLIT, LIFETIME, LIFETIME_SPI,
    };
    use super::*;
    use crate::esp::{Cipher, Integ, Limits, SaConfig};
    use crate::iface::Dir;
    use crate::layout::Part;
    use crate::p4::common::{NO_SA, OK};
    use std::net::IpAddr;

    fn sa_cfg(spi: u32, tunnel: Option<(&str, &str)>, soft_packets: Option<u64>) -> SaConfig {
        SaConfig {
            spi,
            cipher: Cipher::AesGcm128,
            integ: Integ::None,
            enc_key: (0..20u8).map(|b| b ^ spi as u8).collect(),
            auth_key: vec![],
            esn: false,
            replay_window: 64,
            tunnel: tunnel
                .map(|(a, b)| (a.parse::<IpAddr>().unwrap(), b.parse::<IpAddr>().unwrap())),
            soft: Limits {
                packets: soft_packets,
                ..Limits::default()
            },
            hard: Limits::default(),
            initial_seq: 0,
            udp_encap: None,
        }
    }

    /// An `esp_sad` with SA 0 (IPv4 tunnel), 1 (IPv6 tunnel), 2 (no tunnel: transport), 3 (IPv4
    /// tunnel, soft limit after one packet).
    fn sad() -> Box<dyn ExternObject> {
        let obj = EspSadType
            .instantiate(
                "sad",
                &[BitBuf {
                    width: 32,
                    bytes: vec![0, 0, 0, 8],
                }],
            )
            .unwrap();
        let sas = [
            sa_cfg(0x100, Some(("192.0.2.1", "198.51.100.1")), None),
            sa_cfg(0x101, Some(("2001:db8::1", "2001:db8::2")), None),
            sa_cfg(0x102, None, None),
            sa_cfg(0x103, Some(("192.0.2.1", "198.51.100.1")), Some(1)),
        ];
        for (i, c) in sas.into_iter().enumerate() {
            let j = serde_json::json!({ "index": i, "sa": c });
            obj.control("add_sa", j.to_string().as_bytes()).unwrap();
        }
        obj
    }

    /// Slots as a gateway program holds them: 0 the SA index, 1..=12 an IPv4 header's fields,
    /// 13..=22 an IPv6 header's (its addresses two words each), 23 a version, 24 a status, 25 an
    /// event, 26 an SPI.
    fn layouts() -> (ArgLayout, ArgLayout, ArgLayout, [ArgLayout; 4]) {
        let f = |slot, width| Part::Field { slot, width };
        let v4 = [4, 4, 8, 16, 16, 3, 13, 8, 8, 16, 32, 32]
            .iter()
            .enumerate()
            .map(|(i, w)| f(1 + i as u32, *w))
            .collect::<Vec<_>>();
        let v6 = [
            f(13, 4),
            f(14, 8),
            f(15, 20),
            f(16, 16),
            f(17, 8),
            f(18, 8),
            f(19, 128),
            f(21, 128),
        ];
        let one = |slot, width| ArgLayout::new(width, &[f(slot, width)]).unwrap();
        (
            ArgLayout::new(160, &v4).unwrap(),
            ArgLayout::new(320, &v6).unwrap(),
            one(0, 32),
            [one(23, 8), one(24, 8), one(25, 8), one(26, 32)],
        )
    }

    /// Run a call the general way (bit strings from the layouts, `out` ones zero, written back in
    /// order) and the bound way on copies of `slots` and of the payload; both must leave the same
    /// slots and payload.
    fn both_ways(
        method: u32,
        args: &[(Dir, &ArgLayout)],
        slots: &[u64],
        pkt: &[u8],
        at: usize,
    ) -> (Vec<u64>, Vec<u8>) {
        both_ways_after(|_| {}, method, args, slots, pkt, at)
    }

    /// [`both_ways`] on instances that `prep` ran on first.
    fn both_ways_after(
        prep: impl Fn(&dyn ExternObject),
        method: u32,
        args: &[(Dir, &ArgLayout)],
        slots: &[u64],
        pkt: &[u8],
        at: usize,
    ) -> (Vec<u64>, Vec<u8>) {
        let (general_obj, bound_obj) = (sad(), sad());
        prep(&*general_obj);
        prep(&*bound_obj);
        let mut bufs: Vec<BitBuf> = args
            .iter()
            .map(|(d, l)| {
                let mut b = BitBuf::zero(l.width());
                if *d == Dir::In {
                    l.read(slots, &mut b.bytes);
                }
                b
            })
            .collect();
        let (mut g_slots, mut g_owned) = (slots.to_vec(), vec![]);
        let mut p = Payload::in_packet(pkt, at, &mut g_owned);
        general_obj.call(method, &mut bufs, None, &mut p).unwrap();
        let g_payload = p.bytes().to_vec();
        for ((d, l), b) in args.iter().zip(&bufs) {
            if *d != Dir::In {
                l.write(&b.bytes, &mut g_slots);
            }
        }
        let bargs: Vec<BoundArg> = args
            .iter()
            .map(|(dir, layout)| BoundArg {
                dir: *dir,
                layout,
                frame_prefix: false,
            })
            .collect();
        let bound = bound_obj.bind(method, &bargs, None).expect("bound");
        let (mut b_slots, mut b_owned) = (slots.to_vec(), vec![]);
        let mut p = Payload::in_packet(pkt, at, &mut b_owned);
        bound.call(&mut b_slots, &mut p).unwrap();
        assert_eq!(b_slots, g_slots, "method {method}: slots");
        assert_eq!(p.bytes(), &g_payload[..], "method {method}: payload");
        (b_slots, g_payload)
    }

    /// An inner IPv4 (or, `v6`, IPv6) packet of `len` bytes behind a 14-byte Ethernet header.
    fn frame(len: usize, v6: bool) -> Vec<u8> {
        let mut f = vec![0u8; 14 + len];
        for (i, b) in f.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        if v6 {
            f[14] = 0x60;
            f[18..20].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        } else {
            f[14] = 0x45;
            f[16..18].copy_from_slice(&(len as u16).to_be_bytes());
        }
        f
    }

    /// The bound `encap_split`, `decap_split` and `lifetime_event` call sites do what the general
    /// call does: both tunnel families, an SA without tunnel endpoints, an empty slot, an inner
    /// IPv6 packet, a packet that fails its ICV, a lifetime event.
    #[test]
    fn bound_esp_calls_match_the_general_call() {
        let (v4, v6, index, [version, status, event, spi]) = layouts();
        let encap_args = |head: &ArgLayout| {
            let h = head.clone();
            move |index: &ArgLayout,
                  v4: &ArgLayout,
                  v6: &ArgLayout,
                  version: &ArgLayout,
                  status: &ArgLayout| {
                vec![
                    (Dir::In, index.clone()),
                    (Dir::In, h.clone()),
                    (Dir::Out, v4.clone()),
                    (Dir::Out, v6.clone()),
                    (Dir::Out, version.clone()),
                    (Dir::Out, status.clone()),
                ]
            }
        };
        for (sa, want_version, want_status) in [
            (0u64, 4u64, OK),
            (1, 6, OK),
            (2, 0, EspError::BadInner.code() as u64),
            (7, 0, NO_SA),
        ] {
            for inner_v6 in [false, true] {
                let pkt = frame(if inner_v6 { 300 } else { 200 }, inner_v6);
                // the inner IP header parsed into its header's slots (the IPv4 one: the payload
                // follows it)
                let mut slots = vec![0x5a5a_5a5a_5a5a_5a5a; 27];
                slots[0] = sa;
                let head = if inner_v6 { &v6 } else { &v4 };
                let hl = if inner_v6 { 40 } else { 20 };
                head.write(&pkt[14..14 + hl], &mut slots);
                let args = encap_args(head)(&index, &v4, &v6, &version, &status);
                let refs: Vec<(Dir, &ArgLayout)> = args.iter().map(|(d, l)| (*d, l)).collect();
                let (after, esp) = both_ways(ENCAP_SPLIT, &refs, &slots, &pkt, 14 + hl);
                // the same with the header vouched for by the engine: read in one piece from the
                // packet
                {
                    let bargs: Vec<BoundArg> = refs
                        .iter()
                        .enumerate()
                        .map(|(i, (dir, layout))| BoundArg {
                            dir: *dir,
                            layout,
                            frame_prefix: i == 1,
                        })
                        .collect();
                    let bound = sad().bind(ENCAP_SPLIT, &bargs, None).expect("bound");
                    let (mut s2, mut owned) = (slots.clone(), vec![]);
                    let mut p = Payload::in_packet(&pkt, 14 + hl, &mut owned);
                    p.vouch_prefix(hl);
                    bound.call(&mut s2, &mut p).unwrap();
                    assert_eq!(
                        (&s2, p.bytes()),
                        (&after, &esp[..]),
                        "vouched header, SA {sa}"
                    );
                }
                assert_eq!(
                    (after[23], after[24]),
                    (want_version, want_status),
                    "SA {sa}"
                );
                if want_status != OK {
                    assert_eq!(esp, &pkt[14 + hl..], "a failed encap leaves the payload");
                    continue;
                }
                // the outer header and ESP are what `Sa::encapsulate` makes of the inner packet
                let mut whole = vec![];
                Sa::new(sa_cfg(
                    0x100 + sa as u32,
                    [
                        Some(("192.0.2.1", "198.51.100.1")),
                        Some(("2001:db8::1", "2001:db8::2")),
                    ][sa as usize],
                    None,
                ))
                .unwrap()
                .encapsulate(&pkt[14..], &mut whole)
                .unwrap();
                let ohl = if want_version == 4 { 20 } else { 40 };
                let mut outer = vec![0u8; ohl];
                (if want_version == 4 { &v4 } else { &v6 }).read(&after, &mut outer);
                assert_eq!((&outer[..], &esp[..]), (&whole[..ohl], &whole[ohl..]));
                // decap_split of that ESP gives the inner header back in its header and the rest as
                // payload
                let mut esp_frame = vec![0u8; 14 + ohl];
                esp_frame.extend_from_slice(&esp);
                let mut slots = vec![0x1234; 27];
                slots[0] = sa;
                let dargs = [
                    (Dir::In, &index),
                    (Dir::Out, &v4),
                    (Dir::Out, &v6),
                    (Dir::Out, &version),
                    (Dir::Out, &status),
                ];
                let (after, inner) = both_ways(DECAP_SPLIT, &dargs, &slots, &esp_frame, 14 + ohl);
                assert_eq!((after[23], after[24]), (if inner_v6 { 6 } else { 4 }, OK));
                let mut h = vec![0u8; hl];
                head.read(&after, &mut h);
                assert_eq!((&h[..], &inner[..]), (&pkt[14..14 + hl], &pkt[14 + hl..]));
                // the same ESP with its ICV broken
                *esp_frame.last_mut().unwrap() ^= 1;
                let (after, _) = both_ways(DECAP_SPLIT, &dargs, &slots, &esp_frame, 14 + ohl);
                assert_eq!(
                    (after[23], after[24]),
                    (0, EspError::IcvMismatch.code() as u64)
                );
            }
        }
        // lifetime_event with and without the SPI, an SA with a pending event (SA 3 reaches its
        // soft limit with the packet `prep` encapsulates) and an empty slot
        let prep = |o: &dyn ExternObject| {
            let pkt = frame(60, false);
            let (mut owned, mut args) = (
                vec![],
                [
                    BitBuf {
                        width: 32,
                        bytes: vec![0, 0, 0, 3],
                    },
                    BitBuf::zero(8),
                ],
            );
            o.call(
                ENCAP,
                &mut args,
                None,
                &mut Payload::in_packet(&pkt, 14, &mut owned),
            )
            .unwrap();
            assert_eq!(args[1].as_u64(), OK);
        };
        for sa in [0u64, 3, 7] {
            let mut slots = vec![9u64; 27];
            slots[0] = sa;
            let (after, _) = both_ways_after(
                prep,
                LIFETIME_SPI,
                &[(Dir::In, &index), (Dir::Out, &event), (Dir::Out, &spi)],
                &slots,
                &[],
                0,
            );
            let want = match sa {
                7 => (0, 0),
                3 => (1, 0x103),
                _ => (0, 0x100 + sa),
            };
            assert_eq!((after[25], after[26]), want, "SA {sa}");
            let (after, _) = both_ways_after(
                prep,
                LIFETIME,
                &[(Dir::In, &index), (Dir::Out, &event)],
                &slots,
                &[],
                0,
            );
            assert_eq!(
                (after[25], after[26]),
                (want.0, 9),
                "SA {sa}: the SPI's slot untouched"
            );
        }
    }

    /// `encap` with a header argument makes the outer header and ESP of `encap_split` in one
    /// payload, and `decap` by SPI undoes it.
    #[test]
    fn encap_and_decap_by_spi() {
        let o = sad();
        let pkt = frame(120, false);
        let mut owned = vec![];
        let mut p = Payload::in_packet(&pkt, 34, &mut owned);
        let mut args = [
            BitBuf {
                width: 32,
                bytes: vec![0; 4],
            },
            BitBuf {
                width: 160,
                bytes: pkt[14..34].to_vec(),
            },
            BitBuf::zero(8),
        ];
        o.call(ENCAP_HDR, &mut args, None, &mut p).unwrap();
        assert_eq!(args[2].as_u64(), OK);
        let mut whole = vec![];
        Sa::new(sa_cfg(0x100, Some(("192.0.2.1", "198.51.100.1")), None))
            .unwrap()
            .encapsulate(&pkt[14..], &mut whole)
            .unwrap();
        assert_eq!(p.bytes(), &whole[..]);
        let esp = p.bytes()[20..].to_vec();
        let mut owned2 = vec![];
        let mut p = Payload::owned(&mut owned2);
        p.set(&esp);
        let mut args = [
            BitBuf {
                width: 32,
                bytes: 0x100u32.to_be_bytes().to_vec(),
            },
            BitBuf::zero(32),
            BitBuf::zero(8),
        ];
        o.call(DECAP, &mut args, None, &mut p).unwrap();
        assert_eq!((args[1].as_u64(), args[2].as_u64()), (0, OK));
        assert_eq!(p.bytes(), &pkt[14..]);
        // too few arguments: a precise error, not a panic
        assert!(o.call(DECAP, &mut args[..2], None, &mut p).is_err());
    }

    /// `esp_sad` names `del_sa` as the undo of `add_sa` (what a P4Runtime DELETE of an SA entry
    /// runs), and nothing else has an undo.
    #[test]
    fn add_sa_is_undone_by_del_sa() {
        assert_eq!(EspSadType.undo_op("add_sa"), Some("del_sa"));
        assert_eq!(EspSadType.undo_op("del_sa"), None);
        assert_eq!(EspSadType.undo_op("sa_stats"), None);
    }
}
