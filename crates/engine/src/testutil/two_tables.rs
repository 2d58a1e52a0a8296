//! The program the one-key apply tests share: a header of key fields, then `sel`, and the outputs
//! `o`, `k`, `hits`, `run`; tables `t1` and `t2` of actions `fwd(v, key)`, `big(v, key, z)` (its
//! arguments too many words to be held inline) and `NoAction`. A packet with `sel` 0 applies `t1`
//! and marks its `action_run` in `run`; `sel` 1 applies `t2` and marks its `hit` in `hits`; with
//! `unmarked`, `sel` 2 applies `t1` marking neither. [`Act`] is an action as an entry's call and as
//! what a packet shows after it.

use super::pair::{self, first_frame, Kept};
use crate::Engine;
use p4sec_ir::ActionCall;
use std::fmt::Display;

/// What an entry or a default does: fwd(v, key), big(v, key, z) or NoAction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Act {
    Fwd(u8, u128),
    Big(u8, u128, u64),
    No,
}

/// `t2`'s default action, as the program declares it.
pub(crate) const T2_DEFAULT: Act = Act::Big(0xe0, 0xffeeddccbbaa99887766554433221100, 0x5a5a);

impl Act {
    /// The call of this action in `e`'s program.
    pub(crate) fn call(self, e: &Engine) -> ActionCall {
        match self {
            Act::Fwd(v, k) => pair::call(e, "I.fwd", &[v.into(), k]),
            Act::Big(v, k, z) => pair::call(e, "I.big", &[v.into(), k, z.into()]),
            Act::No => pair::call(e, "NoAction", &[]),
        }
    }

    /// What a packet shows after this action, `hit` or not: (o, k, hits, run) as `t1`'s
    /// `action_run` marks it (1 fwd, 2 big, 3 NoAction).
    pub(crate) fn shows(self, hit: bool) -> (u8, u128, u8, u8) {
        let hit = hit as u8;
        match self {
            Act::Fwd(v, k) => (v, k, hit, 1),
            Act::Big(v, k, z) => (v, k ^ z as u128, hit, 2),
            Act::No => (0, 0, hit, 3),
        }
    }
}

/// The program: `keys` the header's key fields (whole bytes together), `key_width` the width of
/// `fwd`'s key (128 at most), `k1` and `k2` the tables' keys, `t1_default` a `fwd`; `unmarked`:
/// with the apply of `sel` 2.
pub(crate) fn program(
    keys: &str,
    key_width: u32,
    [k1, k2]: [&str; 2],
    t1_default: Act,
    unmarked: bool,
) -> String {
    let Act::Fwd(dv, dk) = t1_default else {
        panic!("t1's default is a fwd")
    };
    let Act::Big(bv, bk, bz) = T2_DEFAULT else {
        unreachable!()
    };
    let widened = if key_width == 128 {
        "key"
    } else {
        "(bit<128>)key"
    };
    let sel2 = if unmarked {
        "if (hdr.h.sel == 2) {\n            t1.apply();\n        } else "
    } else {
        ""
    };
    let ingress = format!(
        "    action fwd(bit<8> v, bit<{key_width}> key) {{ hdr.h.o = v; hdr.h.k = {widened}; }}
    action big(bit<8> v, bit<128> key, bit<64> z) {{ hdr.h.o = v; hdr.h.k = key ^ (bit<128>)z; }}
    table t1 {{ key = {{ {k1} }} actions = {{ fwd; big; NoAction; }}
               default_action = fwd({dv:#x}, {dk:#x}); }}
    table t2 {{ key = {{ {k2} }} actions = {{ fwd; big; NoAction; }}
               default_action = big({bv:#x}, {bk:#x}, {bz:#x}); }}
    apply {{
        sm.egress_spec = 1;
        hdr.h.hits = 0;
        {sel2}if (hdr.h.sel == 0) {{
            switch (t1.apply().action_run) {{
                fwd: {{ hdr.h.run = 1; }}
                big: {{ hdr.h.run = 2; }}
                NoAction: {{ hdr.h.run = 3; }}
            }}
        }} else {{
            if (t2.apply().hit) {{ hdr.h.hits = 1; }}
        }}
    }}"
    );
    super::one_header_program(
        &format!("{keys} bit<8> sel; bit<8> o; bit<128> k; bit<8> hits; bit<8> run;"),
        &ingress,
    )
}

/// (o, k, hits, run) of a packet of key bytes `keys` and `sel`, through the kept workers of both
/// engines: forwarded, the same on both (`what` names the packet when not).
pub(crate) fn shown(
    es: &[Kept; 2],
    keys: &[u8],
    sel: u8,
    what: &dyn Display,
) -> (u8, u128, u8, u8) {
    let mut pkt = keys.to_vec();
    pkt.push(sel);
    pkt.extend([0u8; 19]);
    let f = first_frame([&es[0], &es[1]], &pkt, false, what).expect("forwarded");
    let at = keys.len() + 1;
    let k = u128::from_be_bytes(f[at + 1..at + 17].try_into().unwrap());
    (f[at], k, f[at + 17], f[at + 18])
}
