//! Running one STF test: table entries built from `add` commands (names resolved against the
//! program), packets sent through a fresh engine, and the frames it emits compared with the
//! expectations.

use super::parse::*;
use super::pattern::Pattern;
use super::values::*;
use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Program, TableEntry, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Resolve a name: exact, then a suffix on a `.` boundary, then a plain suffix; ambiguity is an
/// error.
pub(super) fn resolve<'a>(
    names: impl Iterator<Item = &'a str> + Clone,
    want: &str,
    what: &str,
) -> Result<usize, String> {
    if let Some(i) = names.clone().position(|n| n == want) {
        return Ok(i);
    }
    for dotted in [true, false] {
        let m: Vec<usize> = names
            .clone()
            .enumerate()
            .filter(|(_, n)| {
                if dotted {
                    n.ends_with(&format!(".{want}"))
                } else {
                    n.ends_with(want)
                }
            })
            .map(|(i, _)| i)
            .collect();
        match m.len() {
            1 => return Ok(m[0]),
            0 => continue,
            _ => return Err(format!("{what} `{want}` is ambiguous")),
        }
    }
    // The same local name under another prefix: p4testgen writes the control's type name where the
    // reference compiler names the control by its `@name` annotation (`IngressI.red` for
    // `altIngressName.red`).
    let last = |n: &str| n.rsplit('.').next().unwrap_or(n).to_string();
    let m: Vec<usize> = names
        .enumerate()
        .filter(|(_, n)| last(n) == last(want))
        .map(|(i, _)| i)
        .collect();
    if let [i] = m.as_slice() {
        return Ok(*i);
    }
    Err(format!("no {what} named `{want}`"))
}

pub(super) fn key_name_matches(key: &str, want: &str) -> bool {
    let want = want.replace('$', "[").chars().collect::<String>();
    // `extra$0.h` → `extra[0].h`
    let want = {
        let mut s = String::new();
        let mut chars = want.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '[' {
                s.push('[');
                while let Some(d) = chars.peek() {
                    if d.is_ascii_digit() {
                        s.push(*d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                s.push(']');
            } else {
                s.push(c);
            }
        }
        s
    };
    let norm = |k: &str| {
        k.replace(".$valid$", ".valid")
            .replace(".isValid()", ".valid")
    };
    let key = norm(key);
    let want = norm(&want);
    key == want
        || key.ends_with(&format!(".{want}"))
        || (want == "valid" && key.ends_with(".valid"))
}

pub(super) fn build_entry(
    prog: &Program,
    ti: usize,
    priority: Option<i64>,
    keys: &[(String, String)],
    action: &str,
    args: &[(String, String)],
) -> Result<TableEntry, String> {
    let t = &prog.tables[ti];
    let mut matches: Vec<Option<FieldMatch>> = vec![None; t.keys.len()];
    for (pos, (kname, kval)) in keys.iter().enumerate() {
        // a key that is an expression may be spelled differently (`a & 0x1` for `a&0x01`), or a
        // field renamed by `@name`: when every key is given, in order, the position decides
        let i = t
            .keys
            .iter()
            .position(|k| k.name == *kname)
            .or_else(|| t.keys.iter().position(|k| key_name_matches(&k.name, kname)))
            .or(if keys.len() == t.keys.len() {
                Some(pos)
            } else {
                None
            })
            .ok_or_else(|| format!("table `{}` has no key `{kname}`", t.name))?;
        if matches[i].is_some() {
            return Err(format!(
                "table `{}`: key `{}` given twice",
                t.name, t.keys[i].name
            ));
        }
        let k = &t.keys[i];
        let w = k.width;
        let m = match k.kind {
            MatchKind::Exact | MatchKind::Selector => FieldMatch::Exact(
                to_value(&parse_num(kval)?.value, w).map_err(|e| format!("key `{kname}`: {e}"))?,
            ),
            MatchKind::Ternary | MatchKind::Optional => {
                let (value, mask) = ternary(kval, w).map_err(|e| format!("key `{kname}`: {e}"))?;
                if k.kind == MatchKind::Optional {
                    match mask.words.iter().map(|x| x.count_ones()).sum::<u32>() {
                        0 => FieldMatch::Optional(None),
                        n if n == w => FieldMatch::Optional(Some(value)),
                        _ => {
                            return Err(format!(
                            "optional key `{kname}` must be all don't-care or exact, not `{kval}`"
                        ))
                        }
                    }
                } else {
                    FieldMatch::Ternary { value, mask }
                }
            }
            MatchKind::Lpm => {
                let (value, plen) = match kval.split_once('/') {
                    Some((v, l)) => (
                        parse_num(v)?.value,
                        l.trim()
                            .parse::<u32>()
                            .map_err(|_| format!("bad prefix length in `{kval}`"))?,
                    ),
                    None if kval.contains("&&&") || parse_num(kval)?.based => {
                        let (value, mask) =
                            ternary(kval, w).map_err(|e| format!("key `{kname}`: {e}"))?;
                        let bit = |i: u32| mask.words[(i / 64) as usize] >> (i % 64) & 1 == 1;
                        let plen = (0..w).rev().take_while(|i| bit(*i)).count() as u32;
                        if (0..w).filter(|i| bit(*i)).count() as u32 != plen {
                            return Err(format!("lpm key `{kname}`: `{kval}` is not a prefix"));
                        }
                        (value.words, plen)
                    }
                    None => (parse_num(kval)?.value, w),
                };
                let plen = plen.min(w);
                let mut value = to_value(&value, w).map_err(|e| format!("key `{kname}`: {e}"))?;
                // the bits past the prefix take no part in the match
                for i in 0..w - plen {
                    value.words[(i / 64) as usize] &= !(1u64 << (i % 64));
                }
                FieldMatch::Lpm {
                    value,
                    prefix_len: plen,
                }
            }
            MatchKind::Range => {
                let (lo, hi) = kval
                    .split_once("->")
                    .ok_or_else(|| format!("range key `{kname}` needs LO->HI"))?;
                FieldMatch::Range {
                    lo: to_value(&parse_num(lo)?.value, w)?,
                    hi: to_value(&parse_num(hi)?.value, w)?,
                }
            }
        };
        matches[i] = Some(m);
    }
    let matches = matches
        .into_iter()
        .zip(&t.keys)
        .map(|(m, k)| {
            m.unwrap_or(match k.kind {
                MatchKind::Exact | MatchKind::Selector => FieldMatch::Exact(Value::new(k.width, 0)),
                _ => FieldMatch::Any,
            })
        })
        .collect();
    let acts: Vec<&str> = t
        .actions
        .iter()
        .map(|a| prog.actions[a.action as usize].name.as_str())
        .collect();
    let ai = resolve(acts.iter().copied(), action, "action")?;
    let aidx = t.actions[ai].action;
    let act = &prog.actions[aidx as usize];
    let mut vals = vec![];
    for (pos, p) in act.params.iter().enumerate() {
        // a parameter renamed by `@name` (p4testgen writes the annotation's name): the position
        // decides when every argument is given
        let by_pos = if args.len() == act.params.len() {
            args.get(pos)
        } else {
            None
        };
        let (_, v) = args
            .iter()
            .find(|(n, _)| *n == p.name)
            .or(by_pos)
            .ok_or_else(|| format!("action `{}` needs argument `{}`", act.name, p.name))?;
        vals.push(
            to_value(&parse_num(v)?.value, p.loc.width)
                .map_err(|e| format!("argument `{}`: {e}", p.name))?,
        );
    }
    let has_prio = t.keys.iter().any(|k| {
        matches!(
            k.kind,
            MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
        )
    });
    let priority = if has_prio {
        priority.unwrap_or(0) as i32
    } else {
        0
    };
    Ok(TableEntry {
        matches,
        action: ActionCall {
            action: aidx,
            args: vals,
        },
        priority,
    })
}

/// The outcome of one STF test.
#[derive(Default)]
pub struct StfResult {
    pub passed: bool,
    pub messages: Vec<String>,
    pub warnings: Vec<String>,
    /// Ports that emitted packets although the test neither sent nor expected any there (a warning
    /// in the reference runner's convention; a failure for generated tests, which predict every
    /// output).
    pub stray_ports: Vec<u32>,
}

impl StfResult {
    pub(super) fn failed(m: String) -> Self {
        StfResult {
            passed: false,
            messages: vec![m],
            ..Default::default()
        }
    }
}

/// Run STF text against a compiled program.
pub fn run_stf(prog: Program, stf: &str, trace: bool) -> StfResult {
    let mut messages = vec![];
    let mut warnings = vec![];
    let fail = StfResult::failed;
    let cmds = match parse_stf(stf) {
        Ok(c) => c,
        Err(e) => return fail(format!("bad STF file: {e}")),
    };
    // the STF runner's extern set: the switch's and the harness's (which only this runner loads)
    let mut externs = p4sec_engine::harness_externs::registry();
    externs.extend(p4sec_externs::p4::registry());
    let engine = match Engine::new(Arc::new(prog), &externs) {
        Ok(e) => e,
        Err(e) => return fail(format!("cannot load the program: {e}")),
    };
    let prog = engine.prog.clone();
    let mut worker = Worker::new(&engine);
    worker.set_trace(trace);
    // deterministic time fields: a virtual clock at 0 for the first packet, 1,000 µs later for each
    // next one (queue depths stay 0: no queueing here); see docs/switch.md, "Traffic manager"
    worker.set_virtual_clock(0, super::STF_CLOCK_STEP_US);
    let mut outs = Outputs::default();
    let mut emitted: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    let mut expected: BTreeMap<u32, Vec<(usize, Pattern)>> = BTreeMap::new();
    let mut watched = std::collections::BTreeSet::new();
    for (ln, c) in &cmds {
        let r: Result<(), String> = (|| {
            match c {
                Cmd::Packet(port, bytes) => {
                    watched.insert(*port);
                    outs.clear();
                    engine.process(&mut worker, *port, bytes, &mut outs);
                    if trace {
                        for l in worker.take_trace() {
                            println!("  [trace] {l}");
                        }
                    }
                    for (p, b) in outs.iter() {
                        emitted.entry(p).or_default().push(b.to_vec());
                    }
                }
                Cmd::Expect(port, pat) => {
                    watched.insert(*port);
                    expected.entry(*port).or_default().push((*ln, pat.clone()));
                }
                Cmd::Add {
                    table,
                    priority,
                    keys,
                    action,
                    args,
                } => {
                    let ti = resolve(prog.tables.iter().map(|t| t.name.as_str()), table, "table")?;
                    let e = build_entry(&prog, ti, *priority, keys, action, args)?;
                    engine.table_insert(ti, e)?;
                }
                Cmd::SetDefault {
                    table,
                    action,
                    args,
                } => {
                    let ti = resolve(prog.tables.iter().map(|t| t.name.as_str()), table, "table")?;
                    let e = build_entry(&prog, ti, None, &[], action, args)?;
                    engine.table_set_default(ti, e.action)?;
                }
                Cmd::RemoveAll => {
                    for ti in 0..prog.tables.len() {
                        if !prog.tables[ti].entries_are_const {
                            engine.table_clear(ti)?;
                        }
                    }
                }
                Cmd::CheckCounter {
                    name,
                    index,
                    what,
                    op,
                    value,
                } => {
                    let ci = resolve(
                        prog.counters.iter().map(|c| c.name.as_str()),
                        name,
                        "counter",
                    )?;
                    let idx = parse_u32(index, "counter index")? as usize;
                    let (p, b) = engine.counter_read(ci, idx)?;
                    let got = if what == "bytes" { b } else { p };
                    let ok = match op.as_str() {
                        "==" => got == *value,
                        "!=" => got != *value,
                        "<" => got < *value,
                        "<=" => got <= *value,
                        ">" => got > *value,
                        ">=" => got >= *value,
                        _ => return Err(format!("unknown comparison `{op}`")),
                    };
                    if !ok {
                        return Err(format!(
                            "counter {name}({index}) {what} is {got}, expected {op} {value}"
                        ));
                    }
                }
                Cmd::MirroringAdd(s, p) => engine.mirroring_add(*s, *p),
                Cmd::ExternControl(inst, op, arg) => {
                    engine.extern_control(inst, op, arg.as_bytes())?;
                }
                Cmd::McMgrpCreate(g) => engine.mc_group_create(*g)?,
                Cmd::McNodeCreate(rid, ports) => {
                    engine.mc_node_create(*rid, ports.clone());
                }
                Cmd::McNodeAssociate(g, n) => engine.mc_node_associate(*g, *n)?,
                Cmd::RegisterWrite(name, idx, v) => {
                    let ri = resolve(
                        prog.registers.iter().map(|r| r.name.as_str()),
                        name,
                        "register",
                    )?;
                    let w = prog.registers[ri].width;
                    engine.register_write(ri, *idx, &to_value(&parse_num(v)?.value, w)?)?;
                }
                Cmd::Wait => {}
            }
            Ok(())
        })();
        if let Err(e) = r {
            messages.push(format!("line {ln}: {e}"));
        }
    }
    for port in &watched {
        let exp = expected.get(port).cloned().unwrap_or_default();
        let got = emitted.get(port).cloned().unwrap_or_default();
        for (i, (ln, pat)) in exp.iter().enumerate() {
            match got.get(i) {
                Some(frame) if pat.matches(frame) => {}
                Some(frame) => messages.push(format!(
                    "port {port}, packet {} (expect on line {ln}): expected {}\n      got {}",
                    i + 1,
                    pat.show(),
                    frame.iter().map(|b| format!("{b:02X}")).collect::<String>()
                )),
                None => messages.push(format!(
                    "port {port}: missing packet {} (expect on line {ln}: {})",
                    i + 1,
                    pat.show()
                )),
            }
        }
        for frame in got.iter().skip(exp.len()) {
            messages.push(format!(
                "port {port}: unexpected packet {}",
                frame.iter().map(|b| format!("{b:02X}")).collect::<String>()
            ));
        }
    }
    let mut stray_ports = vec![];
    for (port, frames) in &emitted {
        if !watched.contains(port) {
            warnings.push(format!(
                "{} packet(s) on unobserved port {port}",
                frames.len()
            ));
            stray_ports.push(*port);
        }
    }
    StfResult {
        passed: messages.is_empty(),
        messages,
        warnings,
        stray_ports,
    }
}

/// Compile `p4` with include directories and macro definitions, then run `stf` on it.
pub fn run_one_with(
    p4: &Path,
    stf: &Path,
    include: &[std::path::PathBuf],
    defines: &[(String, Option<String>)],
    trace: bool,
) -> StfResult {
    let text = match std::fs::read_to_string(stf) {
        Ok(t) => t,
        Err(e) => return StfResult::failed(format!("cannot read {}: {e}", stf.display())),
    };
    let prog = match compile(p4, include, defines) {
        Ok(p) => p,
        Err(e) => return StfResult::failed(format!("compile error: {e}")),
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_stf(prog, &text, trace))) {
        Ok(r) => r,
        Err(_) => StfResult::failed("internal error: the engine panicked (a bug)".into()),
    }
}

pub fn run_one_cli(
    p4: &Path,
    stf: &Path,
    include: &[std::path::PathBuf],
    defines: &[(String, Option<String>)],
    trace: bool,
) -> ExitCode {
    let r = run_one_with(p4, stf, include, defines, trace);
    for w in &r.warnings {
        println!("warning: {w}");
    }
    for m in &r.messages {
        println!("{m}");
    }
    if r.passed {
        println!("PASS {}", p4.display());
        ExitCode::SUCCESS
    } else {
        println!("FAIL {}", p4.display());
        ExitCode::FAILURE
    }
}

/// Compile `path` with include directories and macro definitions (errors as their located text).
pub(super) fn compile(
    path: &Path,
    include: &[std::path::PathBuf],
    defines: &[(String, Option<String>)],
) -> Result<Program, String> {
    let opts = p4sec_frontend::CompileOptions {
        include_dirs: include.to_vec(),
        defines: defines.to_vec(),
    };
    p4sec_frontend::compile_file(path, &opts).map_err(|e| e.to_string())
}
