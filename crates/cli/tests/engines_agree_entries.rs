//! The native engine against the closure engine with table entries installed, so that hits, their
//! actions and their arguments run, not only the defaults: every program of programs/, tests/stf,
//! the shared STF and p4testgen corpora and the production programs (PINS, DASH, fabric, UP4) is
//! loaded on both engines, and frames of several protocols (Ethernet, VLAN, IPv4, IPv6, ARP, TCP,
//! UDP, VXLAN, GTP-U; some with bits flipped or cut) go through both. Before a frame is compared, a
//! scout engine runs it with tracing on: each table it looked up and missed gets an entry matching
//! that key (exact values, a prefix of it, a ternary mask around it, a range or optional around
//! it) with a random action of the table and random arguments, installed on every engine, until
//! the frame misses no table the scout can fill; then an installed entry's action may change, an
//! entry may be deleted or a table's default action change, on every engine. The frames out, the packet statistics and the
//! state left (entries with their direct counters, registers, counters) of the two engines must
//! be the same.

mod common;

use common::{frames, rng};

use p4sec_engine::{Backend, Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, Implementation, MatchKind, Program, TableEntry, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `.p4` files of `dir`, sorted.
fn p4_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "p4"));
    v.sort();
    v
}

fn programs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut v = p4_files(&root.join("programs"));
    v.extend(p4_files(&root.join("tests/stf")));
    for rel in ["conformance/p4c-stf", "conformance/p4testgen"] {
        if let Some(d) = common::shared(rel) {
            v.extend(p4_files(&d));
        }
    }
    if let Some(d) = common::shared("conformance/production") {
        for sub in ["pins", "dash", "fabric_20190420", "omec"] {
            v.extend(p4_files(&d.join(sub)));
        }
    }
    v
}

/// A frame of one of several protocol stacks, lengths and checksums right, the rest random.
fn template(seed: &mut u64) -> Vec<u8> {
    let mut f: Vec<u8> = (0..14).map(|_| rng(seed) as u8).collect();
    let kind = rng(seed) % 8;
    if kind == 7 {
        // ARP
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        f.extend([0, 1, 8, 0, 6, 4, 0, 1 + (rng(seed) % 2) as u8]);
        f.extend((0..20).map(|_| rng(seed) as u8));
        return f;
    }
    if kind == 6 {
        // a VLAN tag before IPv4
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f.extend([(rng(seed) % 16) as u8, rng(seed) as u8]);
        f.extend([0x08, 0x00]);
    } else {
        f[12..14].copy_from_slice(if kind.is_multiple_of(2) {
            &[0x08, 0x00]
        } else {
            &[0x86, 0xdd]
        });
    }
    let v6 = f[f.len() - 2] == 0x86;
    let proto = [6u8, 17, 17, 17][(rng(seed) % 4) as usize];
    // UDP to VXLAN (4789), GTP-U (2152) or anything
    let dport: u16 = match rng(seed) % 3 {
        0 => 4789,
        1 => 2152,
        _ => rng(seed) as u16,
    };
    let mut l4: Vec<u8> = (0..if proto == 6 { 20 } else { 8 })
        .map(|_| rng(seed) as u8)
        .collect();
    let payload: Vec<u8> = (0..16 + rng(seed) % 40).map(|_| rng(seed) as u8).collect();
    if proto == 6 {
        l4[12] = 0x50;
    } else {
        l4[2..4].copy_from_slice(&dport.to_be_bytes());
        let n = (8 + payload.len()) as u16;
        l4[4..6].copy_from_slice(&n.to_be_bytes());
        l4[6..8].fill(0);
    }
    let n = l4.len() + payload.len();
    if v6 {
        let mut h = vec![0x60, 0, 0, 0];
        h.extend((n as u16).to_be_bytes());
        h.extend([proto, 1 + (rng(seed) % 255) as u8]);
        h.extend((0..32).map(|_| rng(seed) as u8));
        f.extend(h);
    } else {
        let mut h: Vec<u8> = (0..20).map(|_| rng(seed) as u8).collect();
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
        h[6] = 0;
        h[7] = 0;
        h[8] = 1 + (rng(seed) % 255) as u8;
        h[9] = proto;
        h[10..12].fill(0);
        let c = p4sec_engine::hash::csum16(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend(h);
    }
    f.extend(l4);
    f.extend(payload);
    f
}

/// Frame `n`: a template, or one with bits flipped or cut short.
fn frame(n: u32, seed: &mut u64) -> Vec<u8> {
    let mut f = template(seed);
    match n % 4 {
        2 => {
            for _ in 0..1 + rng(seed) % 3 {
                let i = (rng(seed) as usize) % f.len();
                f[i] ^= 1 << (rng(seed) % 8);
            }
        }
        3 => {
            let cut = 14 + (rng(seed) as usize) % (f.len() - 14);
            f.truncate(cut);
        }
        _ => {}
    }
    f
}

/// A value of `width` bits from hex digits (the trace's form of a key field).
fn from_hex(width: u32, hex: &str) -> Option<Value> {
    let mut v = Value::new(width, 0);
    let digits = hex.as_bytes();
    for (i, d) in digits.iter().rev().enumerate() {
        let x = (*d as char).to_digit(16)? as u64;
        let (w, b) = (i / 16, (i % 16) * 4);
        if let Some(word) = v.words.get_mut(w) {
            *word |= x << b;
        }
    }
    Some(v)
}

/// A random value of `width` bits.
fn random(width: u32, seed: &mut u64) -> Value {
    let mut v = Value::new(width, 0);
    for w in v.words.iter_mut() {
        *w = rng(seed);
    }
    mask_to(&mut v, width);
    v
}

/// `v` with the bits at and above `width` cleared.
fn mask_to(v: &mut Value, width: u32) {
    for (i, w) in v.words.iter_mut().enumerate() {
        let lo = i as u32 * 64;
        if lo >= width {
            *w = 0;
        } else if width - lo < 64 {
            *w &= (1u64 << (width - lo)) - 1;
        }
    }
}

/// `v` with only its top `len` bits of `width` kept.
fn prefix(v: &Value, width: u32, len: u32) -> Value {
    let mut m = Value::new(width, 0);
    for bit in width - len..width {
        m.words[(bit / 64) as usize] |= 1 << (bit % 64);
    }
    and(v, &m)
}

fn and(a: &Value, b: &Value) -> Value {
    Value {
        width: a.width,
        words: a.words.iter().zip(&b.words).map(|(x, y)| x & y).collect(),
    }
}

/// An entry of table `ti` of `prog` matching the key `fields` (a value per key, in key order),
/// with a random action of the table and random arguments; `None` for a table the test leaves
/// alone (const entries, action profiles and selectors).
fn entry_for(prog: &Program, ti: usize, fields: &[Value], seed: &mut u64) -> Option<TableEntry> {
    let t = &prog.tables[ti];
    if t.entries_are_const || !matches!(t.implementation, Implementation::None) {
        return None;
    }
    let mut matches = vec![];
    for (k, v) in t.keys.iter().zip(fields) {
        let w = k.width;
        matches.push(match k.kind {
            MatchKind::Exact => FieldMatch::Exact(v.clone()),
            MatchKind::Lpm => {
                let len = 1 + (rng(seed) % w as u64) as u32;
                FieldMatch::Lpm {
                    value: prefix(v, w, len),
                    prefix_len: len,
                }
            }
            MatchKind::Ternary => {
                let mask = random(w, seed);
                FieldMatch::Ternary {
                    value: and(v, &mask),
                    mask,
                }
            }
            MatchKind::Range if w <= 64 => {
                let x = v.as_u64();
                let top = if w == 64 { u64::MAX } else { (1 << w) - 1 };
                let (lo, hi) = (
                    x.saturating_sub(rng(seed) % 4),
                    x.saturating_add(rng(seed) % 4),
                );
                FieldMatch::Range {
                    lo: Value::new(w, lo),
                    hi: Value::new(w, hi.min(top)),
                }
            }
            MatchKind::Range => FieldMatch::Any,
            MatchKind::Optional => FieldMatch::Optional(Some(v.clone())),
            MatchKind::Selector => return None,
        });
    }
    let action = random_action(prog, ti, false, seed)?;
    let ternary = t.keys.iter().any(|k| {
        matches!(
            k.kind,
            MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
        )
    });
    Some(TableEntry {
        matches,
        action,
        priority: if ternary {
            1 + (rng(seed) % 1000) as i32
        } else {
            0
        },
    })
}

/// A random action of table `ti` for an entry (or, `default`, for its default action) with random
/// arguments.
fn random_action(prog: &Program, ti: usize, default: bool, seed: &mut u64) -> Option<ActionCall> {
    let choices: Vec<u32> = prog.tables[ti]
        .actions
        .iter()
        .filter(|a| {
            if default {
                !a.table_only
            } else {
                !a.default_only
            }
        })
        .map(|a| a.action)
        .collect();
    let action = *choices.get((rng(seed) as usize) % choices.len().max(1))?;
    let args = prog.actions[action as usize]
        .params
        .iter()
        .map(|p| random(p.loc.width, seed))
        .collect();
    Some(ActionCall { action, args })
}

/// A change to the entries installed so far (`held`, on every engine of `all`): an entry's action
/// changed, an entry deleted, or a table's default action changed, picked at random (or none).
///
/// Returns which: 0 modify, 1 delete, 2 default, 3 none.
fn change(
    prog: &Program,
    all: &[&Engine],
    held: &mut Vec<(usize, TableEntry)>,
    seed: &mut u64,
) -> usize {
    match rng(seed) % 6 {
        0 | 1 if !held.is_empty() => {
            let j = (rng(seed) as usize) % held.len();
            let ti = held[j].0;
            let Some(a) = random_action(prog, ti, false, seed) else {
                return 3;
            };
            held[j].1.action = a;
            for (k, e) in all.iter().enumerate() {
                e.table_modify(ti, held[j].1.clone())
                    .unwrap_or_else(|err| panic!("engine {k}: modify {:?}: {err}", held[j].1));
            }
            0
        }
        2 if !held.is_empty() => {
            let (ti, entry) = held.swap_remove((rng(seed) as usize) % held.len());
            for (k, e) in all.iter().enumerate() {
                e.table_delete(ti, &entry)
                    .unwrap_or_else(|err| panic!("engine {k}: delete {entry:?}: {err}"));
            }
            1
        }
        3 if !prog.tables.is_empty() => {
            let ti = (rng(seed) as usize) % prog.tables.len();
            if prog.tables[ti].default_is_const {
                return 3;
            }
            let Some(a) = random_action(prog, ti, true, seed) else {
                return 3;
            };
            // a default the closure engine refuses is left out; one it takes, every engine takes
            if all[0].table_set_default(ti, a.clone()).is_err() {
                return 3;
            }
            for (k, e) in all.iter().enumerate().skip(1) {
                e.table_set_default(ti, a.clone())
                    .unwrap_or_else(|err| panic!("engine {k}: default {a:?}: {err}"));
            }
            2
        }
        _ => 3,
    }
}

/// The tables `scout` looked up and missed while running `f` on `port`, with their keys.
fn misses(scout: &Engine, w: &mut Worker, port: u32, f: &[u8]) -> Vec<(usize, Vec<Value>)> {
    let mut out = Outputs::default();
    w.set_trace(true);
    scout.process(w, port, f, &mut out);
    let lines = w.take_trace();
    w.set_trace(false);
    let mut found = vec![];
    let mut key: Option<(String, Vec<String>)> = None;
    for l in lines {
        if let Some(rest) = l.strip_prefix("lookup ") {
            key = rest.split_once(" key ").map(|(t, k)| {
                let hex = k
                    .split(", ")
                    .map(|f| f.rsplit('=').next().unwrap_or("").to_string());
                (t.to_string(), hex.collect())
            });
        } else if let Some(rest) = l.strip_prefix("table ") {
            let missed = rest.contains(" miss -> ");
            if let Some((t, hex)) = key.take() {
                let Some(ti) = scout.table_index(&t) else {
                    continue;
                };
                let keys = &scout.prog.tables[ti].keys;
                let values: Option<Vec<Value>> = keys
                    .iter()
                    .zip(&hex)
                    .map(|(k, h)| from_hex(k.width, h))
                    .collect();
                match values {
                    Some(v) if missed && v.len() == keys.len() => found.push((ti, v)),
                    _ => {}
                }
            }
        }
    }
    found
}

/// What an engine's state holds after the frames: every table's entries with their direct
/// counters, the first [`STATE_CELLS`] cells of every register and indexed counter.
fn state(e: &Engine) -> Vec<String> {
    let mut v = vec![];
    for (ti, t) in e.prog.tables.iter().enumerate() {
        v.push(format!("{}: {:?}", t.name, e.table_entries(ti)));
    }
    for (r, reg) in e.prog.registers.iter().enumerate() {
        let n = e.register_size(r).unwrap_or(0).min(STATE_CELLS);
        let cells: Vec<_> = (0..n).map(|i| e.register_read(r, i)).collect();
        v.push(format!("{}: {cells:?}", reg.name));
    }
    for (c, counter) in e.prog.counters.iter().enumerate() {
        let n = (counter.size as usize).min(STATE_CELLS);
        let cells: Vec<_> = (0..n).map(|i| e.counter_read(c, i)).collect();
        v.push(format!("{}: {cells:?}", counter.name));
    }
    v
}

/// Cells of each register and counter compared.
const STATE_CELLS: usize = 512;

/// Entries installed per table at most (a table missed more often keeps its misses).
const PER_TABLE: usize = 48;

#[test]
fn native_engine_emits_what_the_closure_engine_emits_with_entries() {
    let all_externs = common::all_externs();
    let (mut programs_run, mut frames_compared, mut installed) = (0, 0, 0usize);
    let mut states_compared = 0usize;
    // modifies, deletes, defaults changed, none
    let mut changes = [0usize; 4];
    // (P4SEC_DIFF_SEED and P4SEC_DIFF_FRAMES, for longer hunts by hand: another seed, more frames)
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    // (a given seed spread over the word: neighbouring seeds give different runs)
    let mut seed = env("P4SEC_DIFF_SEED")
        .map(|s| s.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .unwrap_or(0x2545_f491_4f6c_dd1d)
        | 1;
    let per_program = env("P4SEC_DIFF_FRAMES").unwrap_or(24) as u32;
    // (each production program, the entries its frames led to)
    let mut production: Vec<(PathBuf, usize)> = vec![];
    for p in programs() {
        let Ok(prog) = p4sec_frontend::compile_file(&p, &Default::default()) else {
            continue;
        };
        let prog = Arc::new(prog);
        let load = |b: Backend| Engine::with_backend(prog.clone(), &all_externs, b);
        let Ok(scout) = load(Backend::Closure) else {
            continue;
        };
        let c1 = load(Backend::Closure).expect("loads twice");
        let c2 = load(Backend::Closure).expect("loads three times");
        let n = load(Backend::Native)
            .unwrap_or_else(|e| panic!("{} does not load on the native engine: {e}", p.display()));
        let mut sw = Worker::new(&scout);
        let mut ws = [Worker::new(&c1), Worker::new(&c2), Worker::new(&n)];
        for w in ws.iter_mut().chain([&mut sw]) {
            w.set_virtual_clock(1000, 10);
        }
        let mut outs = [Outputs::default(), Outputs::default(), Outputs::default()];
        let mut per_table: HashMap<usize, usize> = HashMap::new();
        let mut held: Vec<(usize, TableEntry)> = vec![];
        programs_run += 1;
        for i in 0..per_program {
            let f = frame(i, &mut seed);
            let port = (rng(&mut seed) % 4) as u32;
            // entries for the tables the frame misses, as long as it reaches new ones
            for _ in 0..6 {
                let mut new = 0;
                for (ti, key) in misses(&scout, &mut sw, port, &f) {
                    let count = per_table.entry(ti).or_default();
                    if *count >= PER_TABLE {
                        continue;
                    }
                    let Some(e) = entry_for(&prog, ti, &key, &mut seed) else {
                        continue;
                    };
                    // an entry the closure engine refuses (a value past a field's range, say) is
                    // left out; one it takes must be taken by the native engine too
                    if scout.table_insert(ti, e.clone()).is_err() {
                        continue;
                    }
                    for (k, eng) in [&c1, &c2, &n].into_iter().enumerate() {
                        eng.table_insert(ti, e.clone()).unwrap_or_else(|err| {
                            panic!("{}: engine {k} refuses {e:?}: {err}", p.display())
                        });
                    }
                    *count += 1;
                    new += 1;
                    held.push((ti, e));
                }
                installed += new;
                if new == 0 {
                    break;
                }
            }
            // and a change to what is installed: P4Runtime's modify, delete, default
            changes[change(&prog, &[&scout, &c1, &c2, &n], &mut held, &mut seed)] += 1;
            for (k, e) in [&c1, &c2, &n].into_iter().enumerate() {
                outs[k].clear();
                e.process(&mut ws[k], port, &f, &mut outs[k]);
            }
            let (a, a2, b) = (frames(&outs[0]), frames(&outs[1]), frames(&outs[2]));
            if a == a2 {
                frames_compared += 1;
                assert_eq!(
                    a,
                    b,
                    "{}: frame {f:02x?} on port {port}: the closure engine emits the first, the \
                     native engine the second",
                    p.display()
                );
            }
        }
        if p.components().any(|c| c.as_os_str() == "production") {
            production.push((p.clone(), per_table.values().sum::<usize>()));
        }
        // the state the frames left: where the two closure engines agree, the native engine too
        let (s1, s2, sn) = (state(&c1), state(&c2), state(&n));
        for ((a, a2), b) in s1.iter().zip(&s2).zip(&sn) {
            if a == a2 {
                assert_eq!(
                    a,
                    b,
                    "{}: the closure engine's state, then the native engine's",
                    p.display()
                );
                states_compared += 1;
            }
        }
        let (sa, sb) = (c1.stats(), n.stats());
        assert_eq!(
            (sa.packets_in, sa.packets_out, sa.dropped),
            (sb.packets_in, sb.packets_out, sb.dropped),
            "{}: packet statistics differ between the closure and the native engine",
            p.display()
        );
    }
    eprintln!(
        "{programs_run} programs, {frames_compared} frames compared, {installed} entries, \
         {states_compared} tables, registers and counters compared; {} entries modified, {} \
         deleted, {} defaults changed",
        changes[0], changes[1], changes[2]
    );
    assert!(changes[..3].iter().all(|&c| c > 50), "{changes:?}");
    assert!(programs_run >= 20, "only {programs_run} programs loaded");
    assert!(frames_compared > programs_run * per_program as usize * 5 / 6);
    assert!(installed > programs_run, "{installed} entries installed");
    assert!(
        states_compared > programs_run,
        "{states_compared} states compared"
    );
    // the production programs' frames reach their tables: most get tens of entries
    if common::shared("conformance/production").is_some() {
        assert_eq!(production.len(), 6, "{production:?}");
        let reached = production.iter().filter(|(_, n)| *n >= 20).count();
        assert!(reached >= 5, "{production:?}");
    }
}
