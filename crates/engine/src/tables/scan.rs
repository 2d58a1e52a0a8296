//! The in-order search of small scan tables (ternary, range, optional or mixed keys, at most
//! `SCAN_MAX` entries) whose every key field has at most 64 bits: the entries' matches compiled,
//! whenever the table changes, into two words per field ([`ScanRows`]), so a lookup compares
//! words instead of interpreting the entries' matches (`field_matches`, which the other tables
//! keep). Larger tables keep no rows (tuple space search finds their entries).

use super::keys::prefix_word_mask;
use p4sec_ir::{FieldMatch, MatchKind, Table, TableEntry};

/// Scan tables with at most this many entries are searched in order; larger ones by tuple space
/// search.
pub(super) const SCAN_MAX: usize = 8;

/// Per entry of a scan table, in match order (`TableData::order`), per key field: (mask, value) —
/// the key matches if `key & mask == value` — or for a range key (low, high).
#[derive(Clone, Debug, Default)]
pub(super) struct ScanRows {
    /// Key fields (one key word each); 0: the table has a field wider than 64 bits and is not
    /// compiled.
    fields: usize,
    /// Per field: a range key.
    range: Vec<bool>,
    /// `fields` pairs per entry.
    rows: Vec<(u64, u64)>,
    /// Entries whose match the rows cannot express (a match kind its key does not take): while
    /// there are any, the table is searched by its entries' matches.
    odd: usize,
    /// The rows hold every entry (the table has at most `SCAN_MAX`).
    on: bool,
}

impl ScanRows {
    pub(super) fn new(t: &Table) -> ScanRows {
        let narrow = !t.keys.is_empty() && t.keys.iter().all(|k| (1..=64).contains(&k.width));
        ScanRows {
            fields: if narrow { t.keys.len() } else { 0 },
            range: t.keys.iter().map(|k| k.kind == MatchKind::Range).collect(),
            rows: vec![],
            odd: 0,
            on: true,
        }
    }

    /// The rows may be searched (every entry compiled).
    #[inline(always)]
    pub(super) fn usable(&self) -> bool {
        self.fields > 0 && self.on && self.odd == 0
    }

    /// Entry `e`'s row: `None` if a field's match does not fit its key's kind.
    fn row(&self, t: &Table, e: &TableEntry) -> Option<Vec<(u64, u64)>> {
        let w0 = |v: &p4sec_ir::Value| v.words.first().copied().unwrap_or(0);
        (0..self.fields)
            .map(|fi| {
                let range = self.range[fi];
                match (e.matches.get(fi).unwrap_or(&FieldMatch::Any), range) {
                    (FieldMatch::Any | FieldMatch::Optional(None), false) => Some((0, 0)),
                    (FieldMatch::Any | FieldMatch::Optional(None), true) => Some((0, u64::MAX)),
                    (FieldMatch::Exact(v) | FieldMatch::Optional(Some(v)), false) => {
                        Some((u64::MAX, w0(v)))
                    }
                    (FieldMatch::Exact(v) | FieldMatch::Optional(Some(v)), true) => {
                        Some((w0(v), w0(v)))
                    }
                    (FieldMatch::Ternary { value, mask }, false) => {
                        Some((w0(mask), w0(value) & w0(mask)))
                    }
                    (FieldMatch::Lpm { value, prefix_len }, false) => {
                        let m = prefix_word_mask(t.keys[fi].width, *prefix_len, 0);
                        Some((m, w0(value) & m))
                    }
                    (FieldMatch::Range { lo, hi }, true) => Some((w0(lo), w0(hi))),
                    _ => None,
                }
            })
            .collect()
    }

    /// The rows of `entries` (`n` of them), in match order.
    pub(super) fn rebuild<'a>(
        &mut self,
        t: &Table,
        entries: impl Iterator<Item = &'a TableEntry>,
        n: usize,
    ) {
        self.rows.clear();
        self.odd = 0;
        self.on = n <= SCAN_MAX;
        if self.fields == 0 || !self.on {
            return;
        }
        for e in entries {
            match self.row(t, e) {
                Some(r) => self.rows.extend(r),
                None => {
                    self.odd += 1;
                    // never searched while the table has an odd entry
                    self.rows.extend(std::iter::repeat_n((0, 0), self.fields));
                }
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.rows.clear();
        self.odd = 0;
        self.on = true;
    }

    /// The first row in match order that `key` (one word per field) matches: its position.
    #[inline]
    pub(super) fn search(&self, key: &[u64]) -> Option<usize> {
        let n = self.fields;
        let key = key.get(..n)?;
        self.rows.chunks_exact(n).position(|r| {
            r.iter()
                .zip(&self.range)
                .zip(key)
                .all(
                    |((&(a, b), &range), &k)| {
                        if range {
                            a <= k && k <= b
                        } else {
                            k & a == b
                        }
                    },
                )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{field_matches, TableData};
    use p4sec_ir::{ActionCall, FieldMatch, TableEntry, Value};

    const SRC: &str = r#"#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bit<8> c; bit<32> d; bit<8> e; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    table t {
        key = { hdr.h.a: ternary; hdr.h.b: range; hdr.h.c: exact; hdr.h.d: lpm; hdr.h.e: optional; }
        actions = { NoAction; }
        size = 64;
    }
    apply { t.apply(); }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"#;

    /// The compiled rows find the same entry as the entries' matches in priority order (highest
    /// first, then the earliest installed), on random keys, while random entries come and go and
    /// the table grows past `SCAN_MAX` (rows dropped) and shrinks back (rows rebuilt).
    #[test]
    fn rows_agree_with_the_entries_matches() {
        let prog = p4sec_frontend::compile_str("scan.p4", SRC, &Default::default()).unwrap();
        let t = &prog.tables[0];
        let mut d = TableData::new(t).unwrap();
        let mut s = 99u64;
        let mut rnd = |n: u64| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) % n
        };
        // installed: (entry, insertion number)
        let mut live: Vec<(TableEntry, u64)> = vec![];
        let mut seq = 0;
        let (mut compiled, mut hits) = (0, 0);
        for step in 0..3000 {
            let target = if (step / 500) % 2 == 0 { 6 } else { 14 };
            if live.len() < target && rnd(3) > 0 {
                let v = |w: u32, x: u64| Value::new(w, x);
                let lo = rnd(8) * 100;
                let e = TableEntry {
                    matches: vec![
                        match rnd(3) {
                            0 => FieldMatch::Any,
                            _ => FieldMatch::Ternary {
                                value: v(8, rnd(4)),
                                mask: v(8, [0x03, 0x01, 0x02][rnd(3) as usize]),
                            },
                        },
                        match rnd(3) {
                            0 => FieldMatch::Any,
                            _ => FieldMatch::Range {
                                lo: v(16, lo),
                                hi: v(16, lo + rnd(300)),
                            },
                        },
                        FieldMatch::Exact(v(8, rnd(2))),
                        FieldMatch::Lpm {
                            value: v(32, 0x0a00_0000 | rnd(4) << 22),
                            prefix_len: [0, 8, 10][rnd(3) as usize] as u32,
                        },
                        match rnd(2) {
                            0 => FieldMatch::Optional(None),
                            _ => FieldMatch::Optional(Some(v(8, rnd(2)))),
                        },
                    ],
                    action: ActionCall {
                        action: 0,
                        args: vec![],
                    },
                    priority: rnd(4) as i32,
                };
                if d.insert(t, e.clone()).is_ok() {
                    seq += 1;
                    live.push((e, seq));
                }
            } else if !live.is_empty() {
                let (e, _) = live.remove(rnd(live.len() as u64) as usize);
                d.delete(t, &e).unwrap();
            }
            assert_eq!(d.scan.usable(), live.len() <= super::SCAN_MAX);
            compiled += d.scan.usable() as u32;
            for _ in 0..8 {
                let key = [
                    rnd(4),
                    rnd(900),
                    rnd(2),
                    0x0a00_0000 | rnd(4) << 22 | rnd(1 << 22),
                    rnd(2),
                ];
                let want = live
                    .iter()
                    .filter(|(e, _)| {
                        e.matches
                            .iter()
                            .zip(&t.keys)
                            .zip(&key)
                            .all(|((m, k), w)| field_matches(m, &[*w], k.width))
                    })
                    .max_by_key(|(e, s)| (e.priority, std::cmp::Reverse(*s)))
                    .map(|(e, _)| e);
                let got = d.lookup(t, &key).map(|i| &d.entries[i].entry);
                assert_eq!(got, want, "step {step}, key {key:x?}");
                hits += got.is_some() as u32;
            }
        }
        assert!(compiled > 1000, "rows searched in {compiled} steps");
        assert!(hits > 2000, "{hits} hits");
    }
}
