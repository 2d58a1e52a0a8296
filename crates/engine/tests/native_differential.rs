//! Differential test of the two backends: every program of the STF corpora (ours in `tests/stf`,
//! the reference compiler's in `$P4SEC_SHARED/conformance/p4c-stf`, and the programs of
//! `$P4SEC_SHARED/conformance/p4testgen`) loaded on the closure and on the native backend, given
//! the same table entries (a few random ones per table, many wildcards so that they hit) and the
//! same packets (the STF's own, mutations of them and random ones); every packet must leave both
//! with the same frames, and afterwards both must hold the same registers, counters and table
//! statistics. The corpora in the shared directory are skipped when it is absent.

use p4sec_engine::{Backend, Engine, Outputs, Worker};
use p4sec_ir::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A small deterministic generator (xorshift), so that a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn value(&mut self, width: u32) -> Value {
        // small values half of the time: metadata and flags are mostly small
        let mut v = Value::new(width, 0);
        for x in v.words.iter_mut() {
            *x = if self.below(2) == 0 {
                self.below(4)
            } else {
                self.next()
            };
        }
        if !width.is_multiple_of(64) {
            if let Some(top) = v.words.last_mut() {
                *top &= (1u64 << (width % 64)) - 1;
            }
        }
        v
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared(rel: &str) -> Option<PathBuf> {
    let d = PathBuf::from(std::env::var("P4SEC_SHARED").ok()?).join(rel);
    d.is_dir().then_some(d)
}

/// The `packet PORT HEX` lines of an STF file.
fn stf_packets(text: &str) -> Vec<(u32, Vec<u8>)> {
    let mut out = vec![];
    for line in text.lines() {
        let mut t = line.split_whitespace();
        if t.next() != Some("packet") {
            continue;
        }
        let Some(Ok(port)) = t.next().map(str::parse::<u32>) else {
            continue;
        };
        let hex: String = t
            .collect::<String>()
            .chars()
            .filter(|c| c.is_ascii_hexdigit())
            .collect();
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
            .collect();
        out.push((port, bytes));
    }
    out
}

fn random_entry(rng: &mut Rng, p: &Program, t: &Table) -> Option<TableEntry> {
    let acts: Vec<&TableAction> = t.actions.iter().filter(|a| !a.default_only).collect();
    let a = acts.get(rng.below(acts.len() as u64) as usize)?;
    let action = &p.actions[a.action as usize];
    let matches = t
        .keys
        .iter()
        .map(|k| {
            let wild = rng.below(2) == 0;
            match k.kind {
                MatchKind::Exact => FieldMatch::Exact(rng.value(k.width)),
                MatchKind::Lpm if wild => FieldMatch::Lpm {
                    value: Value::new(k.width, 0),
                    prefix_len: 0,
                },
                MatchKind::Lpm => {
                    let len = rng.below(k.width as u64 + 1) as u32;
                    let mut v = rng.value(k.width);
                    for b in 0..k.width.saturating_sub(len) {
                        v.words[(b / 64) as usize] &= !(1u64 << (b % 64));
                    }
                    FieldMatch::Lpm {
                        value: v,
                        prefix_len: len,
                    }
                }
                MatchKind::Ternary if wild => FieldMatch::Any,
                MatchKind::Ternary => {
                    let m = rng.value(k.width);
                    let mut v = rng.value(k.width);
                    for (x, y) in v.words.iter_mut().zip(&m.words) {
                        *x &= *y;
                    }
                    FieldMatch::Ternary { value: v, mask: m }
                }
                MatchKind::Optional if wild => FieldMatch::Optional(None),
                MatchKind::Optional => FieldMatch::Optional(Some(rng.value(k.width))),
                _ => FieldMatch::Any,
            }
        })
        .collect();
    Some(TableEntry {
        matches,
        action: ActionCall {
            action: a.action,
            args: action
                .params
                .iter()
                .map(|x| rng.value(x.loc.width))
                .collect(),
        },
        priority: 1 + rng.below(100) as i32,
    })
}

/// Runs one program on both backends; `Err` describes the first difference.
fn compare(p4: &Path, stf: Option<&Path>, include: &[PathBuf]) -> Result<bool, String> {
    let opts = p4sec_frontend::CompileOptions {
        include_dirs: include.to_vec(),
        defines: vec![],
    };
    let Ok(prog) = p4sec_frontend::compile_file(p4, &opts) else {
        return Ok(false);
    };
    let prog = Arc::new(prog);
    let mut externs = p4sec_engine::harness_externs::registry();
    externs.extend(p4sec_externs::p4::registry());
    let Ok(a) = Engine::with_backend(prog.clone(), &externs, Backend::Closure) else {
        return Ok(false);
    };
    let b = Engine::with_backend(prog.clone(), &externs, Backend::Native)
        .map_err(|e| format!("native backend refused what the closures load: {e}"))?;
    if b.backend() != Backend::Native {
        return Err("no native code generated".into());
    }
    let mut rng = Rng(0x9e3779b97f4a7c15 ^ p4.to_string_lossy().len() as u64);
    for (ti, t) in prog.tables.iter().enumerate() {
        if t.entries_are_const || !matches!(t.implementation, Implementation::None) {
            continue;
        }
        for _ in 0..4 {
            if let Some(e) = random_entry(&mut rng, &prog, t) {
                let (ra, rb) = (a.table_insert(ti, e.clone()), b.table_insert(ti, e));
                if ra.is_ok() != rb.is_ok() {
                    return Err(format!("table {}: insert {ra:?} vs {rb:?}", t.name));
                }
            }
        }
    }
    let mut packets = stf
        .and_then(|s| std::fs::read_to_string(s).ok())
        .map(|t| stf_packets(&t))
        .unwrap_or_default();
    let base = packets.clone();
    for (port, bytes) in &base {
        for _ in 0..3 {
            let mut m = bytes.clone();
            if !m.is_empty() {
                let i = rng.below(m.len() as u64) as usize;
                m[i] ^= 1 << rng.below(8);
                if rng.below(4) == 0 {
                    m.truncate(rng.below(m.len() as u64) as usize);
                }
            }
            packets.push((*port, m));
        }
    }
    for _ in 0..8 {
        let len = rng.below(80) as usize;
        packets.push((
            rng.below(8) as u32,
            (0..len).map(|_| rng.next() as u8).collect(),
        ));
    }
    let (mut wa, mut wb) = (Worker::new(&a), Worker::new(&b));
    // the time fields from a virtual clock, the same in both
    wa.set_virtual_clock(0, 1000);
    wb.set_virtual_clock(0, 1000);
    let (mut oa, mut ob) = (Outputs::default(), Outputs::default());
    for (i, (port, bytes)) in packets.iter().enumerate() {
        oa.clear();
        ob.clear();
        a.process(&mut wa, *port, bytes, &mut oa);
        b.process(&mut wb, *port, bytes, &mut ob);
        let fa: Vec<_> = oa.iter().collect();
        let fb: Vec<_> = ob.iter().collect();
        if fa != fb {
            return Err(format!(
                "packet {i} (port {port}, {:02x?}): closure emitted {fa:02x?}, native {fb:02x?}",
                bytes
            ));
        }
    }
    if a.stats() != b.stats() {
        return Err(format!("statistics: {:?} vs {:?}", a.stats(), b.stats()));
    }
    for (ri, r) in prog.registers.iter().enumerate() {
        for i in 0..r.size as usize {
            if a.register_read(ri, i) != b.register_read(ri, i) {
                return Err(format!("register {}[{i}] differs", r.name));
            }
        }
    }
    for (ci, c) in prog.counters.iter().enumerate() {
        for i in 0..c.size as usize {
            if a.counter_read(ci, i) != b.counter_read(ci, i) {
                return Err(format!("counter {}[{i}] differs", c.name));
            }
        }
    }
    for ti in 0..prog.tables.len() {
        if a.table_stats(ti) != b.table_stats(ti) {
            return Err(format!(
                "table {} hit/miss counts differ",
                prog.tables[ti].name
            ));
        }
    }
    Ok(true)
}

/// Every `.p4` of `dir` with its `.stf` (or, in the p4testgen layout, `NAME/NAME_1.stf`).
fn corpus(dir: &Path) -> (usize, Vec<String>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "p4"))
        .collect();
    files.sort();
    let include = vec![dir.to_path_buf()];
    let (mut ran, mut bad) = (0, vec![]);
    for p4 in files {
        let stem = p4.file_stem().unwrap().to_string_lossy().to_string();
        let stf = [
            p4.with_extension("stf"),
            dir.join(&stem).join(format!("{stem}_1.stf")),
        ]
        .into_iter()
        .find(|p| p.is_file());
        match std::panic::catch_unwind(|| compare(&p4, stf.as_deref(), &include)) {
            Ok(Ok(true)) => ran += 1,
            Ok(Ok(false)) => {}
            Ok(Err(e)) => bad.push(format!("{}: {e}", p4.display())),
            Err(_) => bad.push(format!("{}: panicked", p4.display())),
        }
    }
    (ran, bad)
}

fn check(dir: &Path, at_least: usize) {
    let (ran, bad) = corpus(dir);
    eprintln!(
        "{}: {ran} programs agree, {} differ",
        dir.display(),
        bad.len()
    );
    assert!(bad.is_empty(), "backends differ:\n{}", bad.join("\n"));
    assert!(
        ran >= at_least,
        "only {ran} programs of {} ran",
        dir.display()
    );
}

#[test]
fn own_stf_programs_agree() {
    check(&root().join("tests/stf"), 30);
}

#[test]
fn reference_stf_programs_agree() {
    if let Some(d) = shared("conformance/p4c-stf") {
        check(&d, 100);
    }
}

#[test]
fn p4testgen_programs_agree() {
    if let Some(d) = shared("conformance/p4testgen") {
        check(&d, 100);
    }
}

#[test]
fn router_agrees() {
    check(&root().join("programs"), 3);
}
