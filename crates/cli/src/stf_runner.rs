//! The STF ("simple test framework") runner: parses `.stf` files (see conformance/STF-FORMAT.md in the shared corpora, `$P4SEC_SHARED`),
//! drives the engine, and compares emitted frames with the expectations.

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Program, TableEntry, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// A number as written in STF: value, don't-care mask (1 = significant) and the number of bits written.
#[derive(Clone, Debug)]
struct Num {
    value: Vec<u64>,
    care: Vec<u64>,
    /// Written in hex or binary (ternary keys require it).
    based: bool,
}

fn set_bit(v: &mut Vec<u64>, i: u32) {
    let w = (i / 64) as usize;
    if v.len() <= w {
        v.resize(w + 1, 0);
    }
    v[w] |= 1 << (i % 64);
}

fn parse_num(s: &str) -> Result<Num, String> {
    let s = s.trim();
    let (radix, digits) = if let Some(d) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16u32, d)
    } else if let Some(d) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        (2, d)
    } else {
        (10, s)
    };
    if digits.is_empty() {
        return Err(format!("malformed number `{s}`"));
    }
    if radix == 10 {
        let mut value: Vec<u64> = vec![0];
        for c in digits.chars() {
            let d = c.to_digit(10).ok_or_else(|| format!("malformed number `{s}`"))? as u128;
            let mut carry = d;
            for w in value.iter_mut() {
                let x = (*w as u128) * 10 + carry;
                *w = x as u64;
                carry = x >> 64;
            }
            if carry > 0 {
                value.push(carry as u64);
            }
        }
        return Ok(Num { care: vec![u64::MAX; value.len()], value, based: false });
    }
    let per = if radix == 16 { 4 } else { 1 };
    let digits: Vec<char> = digits.chars().filter(|c| *c != '_').collect();
    let n = digits.len() as u32;
    let mut value = vec![];
    let mut care = vec![];
    for (i, c) in digits.iter().enumerate() {
        let pos = (n - 1 - i as u32) * per;
        if *c == '*' {
            continue;
        }
        let d = c.to_digit(radix).ok_or_else(|| format!("malformed number `{s}`"))?;
        for b in 0..per {
            set_bit(&mut care, pos + b);
            if (d >> b) & 1 == 1 {
                set_bit(&mut value, pos + b);
            }
        }
    }
    Ok(Num { value, care, based: true })
}

fn to_value(v: &[u64], width: u32) -> Result<Value, String> {
    let n = p4sec_ir::words_for(width) as usize;
    let mut words = v.to_vec();
    words.resize(n.max(words.len()), 0);
    for (i, w) in words.iter().enumerate() {
        let lo = i as u32 * 64;
        let bad = if lo >= width { *w != 0 } else { width - lo < 64 && (*w >> (width - lo)) != 0 };
        if bad {
            return Err(format!("value does not fit in {width} bits"));
        }
    }
    words.truncate(n);
    Ok(Value { width, words })
}

fn ones(width: u32) -> Vec<u64> {
    let mut v = vec![];
    for i in 0..width {
        set_bit(&mut v, i);
    }
    v
}

#[derive(Clone, Debug)]
enum Pattern {
    /// Nibbles; None = `*`.
    Nibbles(Vec<Option<u8>>, bool),
    Any,
}

impl Pattern {
    fn matches(&self, frame: &[u8]) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Nibbles(n, exact) => {
                if frame.len() * 2 < n.len() || (*exact && frame.len() * 2 != n.len()) {
                    return false;
                }
                n.iter().enumerate().all(|(i, want)| {
                    let b = frame[i / 2];
                    let got = if i % 2 == 0 { b >> 4 } else { b & 0xf };
                    want.map(|w| w == got).unwrap_or(true)
                })
            }
        }
    }
    fn show(&self) -> String {
        match self {
            Pattern::Any => "(any)".into(),
            Pattern::Nibbles(n, exact) => {
                let mut s: String = n.iter().map(|x| x.map(|d| format!("{d:X}")).unwrap_or("*".into())).collect();
                if *exact {
                    s.push_str(" $");
                }
                s
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Cmd {
    ExternControl(String, String, String),
    Packet(u32, Vec<u8>),
    Expect(u32, Pattern),
    Add { table: String, priority: Option<i64>, keys: Vec<(String, String)>, action: String, args: Vec<(String, String)> },
    SetDefault { table: String, action: String, args: Vec<(String, String)> },
    RemoveAll,
    CheckCounter { name: String, index: String, what: String, op: String, value: u64 },
    MirroringAdd(u32, u32),
    McMgrpCreate(u32),
    McNodeCreate(u32, Vec<u32>),
    McNodeAssociate(u32, u32),
    RegisterWrite(String, usize, String),
    Wait,
}

fn hex_bytes(s: &str) -> Result<Vec<u8>, String> {
    let digits: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if digits.len() % 2 != 0 {
        return Err("odd number of hex digits in packet data".into());
    }
    (0..digits.len() / 2).map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| format!("bad hex byte `{}`", &digits[2 * i..2 * i + 2]))).collect()
}

fn parse_u32(s: &str, what: &str) -> Result<u32, String> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x") { u32::from_str_radix(h, 16) } else { s.parse() };
    r.map_err(|_| format!("bad {what} `{s}`"))
}

/// Split `name(a:1, b:2)` into name and argument pairs.
fn parse_action(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    let s = s.trim();
    let Some(open) = s.find('(') else { return Ok((s.to_string(), vec![])) };
    let close = s.rfind(')').ok_or_else(|| format!("missing `)` in action `{s}`"))?;
    let name = s[..open].trim().to_string();
    let mut args = vec![];
    for a in s[open + 1..close].split(',').map(|x| x.trim()).filter(|x| !x.is_empty()) {
        let (k, v) = a.split_once(':').ok_or_else(|| format!("action argument `{a}` needs the form name:value"))?;
        args.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok((name, args))
}

fn parse_stf(text: &str) -> Result<Vec<(usize, Cmd)>, String> {
    let mut out = vec![];
    for (ln, raw) in text.lines().enumerate() {
        let line = match raw.find('#') {
            Some(p) => &raw[..p],
            None => raw,
        }
        .trim();
        if line.is_empty() {
            continue;
        }
        let ctx = |e: String| format!("line {}: {e}", ln + 1);
        let (word, rest) = line.split_at(line.find(char::is_whitespace).unwrap_or(line.len()));
        let rest = rest.trim();
        let cmd = match word.to_ascii_lowercase().as_str() {
            "packet" => {
                let (p, data) = rest.split_at(rest.find(char::is_whitespace).unwrap_or(rest.len()));
                Cmd::Packet(parse_u32(p, "port").map_err(ctx)?, hex_bytes(data).map_err(ctx)?)
            }
            "expect" => {
                let (p, data) = rest.split_at(rest.find(char::is_whitespace).unwrap_or(rest.len()));
                let port = parse_u32(p, "port").map_err(ctx)?;
                let data = data.trim();
                if data.is_empty() {
                    Cmd::Expect(port, Pattern::Any)
                } else {
                    let exact = data.ends_with('$');
                    let body = data.trim_end_matches('$');
                    let mut nib = vec![];
                    for c in body.chars().filter(|c| !c.is_whitespace()) {
                        if c == '*' {
                            nib.push(None);
                        } else {
                            nib.push(Some(c.to_digit(16).ok_or_else(|| ctx(format!("bad hex digit `{c}` in expect")))? as u8));
                        }
                    }
                    Cmd::Expect(port, Pattern::Nibbles(nib, exact))
                }
            }
            "add" => {
                let mut toks = rest.split_whitespace().peekable();
                let table = toks.next().ok_or_else(|| ctx("add needs a table".into()))?.trim_matches('"').to_string();
                let mut priority = None;
                if let Some(t) = toks.peek() {
                    if t.chars().all(|c| c.is_ascii_digit()) {
                        priority = Some(t.parse::<i64>().map_err(|_| ctx("bad priority".into()))?);
                        toks.next();
                    }
                }
                let remaining: Vec<&str> = toks.collect();
                let joined = remaining.join(" ");
                let joined = match joined.find(" = ") {
                    Some(p) => joined[..p].to_string(),
                    None => joined,
                };
                // keys are `name:value` tokens before the action token (which contains `(` or is the last)
                let mut keys = vec![];
                let mut action_text = String::new();
                let mut in_action = false;
                for tok in joined.split_whitespace() {
                    if !in_action && tok.contains(':') && !tok.contains('(') {
                        let (k, v) = tok.split_once(':').unwrap();
                        keys.push((k.trim_matches('"').to_string(), v.to_string()));
                    } else {
                        in_action = true;
                        action_text.push_str(tok);
                        action_text.push(' ');
                    }
                }
                let (action, args) = parse_action(&action_text).map_err(ctx)?;
                if action.is_empty() {
                    return Err(ctx("add needs an action".into()));
                }
                Cmd::Add { table, priority, keys, action, args }
            }
            "setdefault" => {
                let (t, a) = rest.split_at(rest.find(char::is_whitespace).unwrap_or(rest.len()));
                let (action, args) = parse_action(a).map_err(ctx)?;
                Cmd::SetDefault { table: t.to_string(), action, args }
            }
            "remove" => Cmd::RemoveAll,
            "check_counter" => {
                // check_counter name(index) [packets|bytes op value]
                let open = rest.find('(').ok_or_else(|| ctx("check_counter needs name(index)".into()))?;
                let close = rest.find(')').ok_or_else(|| ctx("check_counter needs name(index)".into()))?;
                let name = rest[..open].trim().to_string();
                let index = rest[open + 1..close].trim().to_string();
                let tail: Vec<&str> = rest[close + 1..].split_whitespace().collect();
                let (what, op, value) = match tail.as_slice() {
                    [w, o, v] => (w.to_string(), o.to_string(), v.parse::<u64>().map_err(|_| ctx(format!("bad counter value `{v}`")))?),
                    [] => ("packets".to_string(), ">=".to_string(), 0),
                    _ => return Err(ctx("check_counter: expected `packets|bytes OP VALUE`".into())),
                };
                Cmd::CheckCounter { name, index, what, op, value }
            }
            // p4sec extension: a control-plane operation of an extern instance, with its JSON argument
            "extern_control" => {
                let mut it = rest.splitn(3, char::is_whitespace);
                match (it.next(), it.next(), it.next()) {
                    (Some(inst), Some(op), Some(arg)) => Cmd::ExternControl(inst.to_string(), op.to_string(), arg.trim().to_string()),
                    _ => return Err(ctx("extern_control needs INSTANCE OPERATION JSON".into())),
                }
            }
            "mirroring_add" => {
                let v: Vec<&str> = rest.split_whitespace().collect();
                if v.len() != 2 {
                    return Err(ctx("mirroring_add needs SESSION PORT".into()));
                }
                Cmd::MirroringAdd(parse_u32(v[0], "session").map_err(ctx)?, parse_u32(v[1], "port").map_err(ctx)?)
            }
            "mc_mgrp_create" => Cmd::McMgrpCreate(parse_u32(rest, "group").map_err(ctx)?),
            "mc_node_create" => {
                let v: Vec<u32> = rest.split_whitespace().map(|x| parse_u32(x, "number")).collect::<Result<_, _>>().map_err(ctx)?;
                if v.is_empty() {
                    return Err(ctx("mc_node_create needs RID PORT...".into()));
                }
                Cmd::McNodeCreate(v[0], v[1..].to_vec())
            }
            "mc_node_associate" => {
                let v: Vec<u32> = rest.split_whitespace().map(|x| parse_u32(x, "number")).collect::<Result<_, _>>().map_err(ctx)?;
                if v.len() != 2 {
                    return Err(ctx("mc_node_associate needs GROUP NODE".into()));
                }
                Cmd::McNodeAssociate(v[0], v[1])
            }
            "register_write" => {
                let v: Vec<&str> = rest.split_whitespace().collect();
                if v.len() != 3 {
                    return Err(ctx("register_write needs NAME INDEX VALUE".into()));
                }
                Cmd::RegisterWrite(v[0].to_string(), parse_u32(v[1], "index").map_err(ctx)? as usize, v[2].to_string())
            }
            "wait" => Cmd::Wait,
            "no_packet" | "mirroring_add_mc" | "mirroring_delete" | "mirroring_get" | "mc_node_update" | "counter_read" | "counter_write"
            | "register_read" | "register_reset" | "meter_get_rates" | "meter_set_rates" | "meter_array_set_rates" => Cmd::Wait,
            other => return Err(ctx(format!("unknown STF command `{other}`"))),
        };
        out.push((ln + 1, cmd));
    }
    Ok(out)
}

/// Resolve a name: exact, then a suffix on a `.` boundary, then a plain suffix; ambiguity is an error.
fn resolve<'a>(names: impl Iterator<Item = &'a str> + Clone, want: &str, what: &str) -> Result<usize, String> {
    if let Some(i) = names.clone().position(|n| n == want) {
        return Ok(i);
    }
    for dotted in [true, false] {
        let m: Vec<usize> = names
            .clone()
            .enumerate()
            .filter(|(_, n)| if dotted { n.ends_with(&format!(".{want}")) } else { n.ends_with(want) })
            .map(|(i, _)| i)
            .collect();
        match m.len() {
            1 => return Ok(m[0]),
            0 => continue,
            _ => return Err(format!("{what} `{want}` is ambiguous")),
        }
    }
    Err(format!("no {what} named `{want}`"))
}

fn key_name_matches(key: &str, want: &str) -> bool {
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
    let norm = |k: &str| k.replace(".$valid$", ".valid").replace(".isValid()", ".valid");
    let key = norm(key);
    let want = norm(&want);
    key == want || key.ends_with(&format!(".{want}")) || (want == "valid" && key.ends_with(".valid"))
}

fn build_entry(prog: &Program, ti: usize, priority: Option<i64>, keys: &[(String, String)], action: &str, args: &[(String, String)]) -> Result<TableEntry, String> {
    let t = &prog.tables[ti];
    let mut matches: Vec<Option<FieldMatch>> = vec![None; t.keys.len()];
    for (kname, kval) in keys {
        let i = t
            .keys
            .iter()
            .position(|k| k.name == *kname)
            .or_else(|| t.keys.iter().position(|k| key_name_matches(&k.name, kname)))
            .ok_or_else(|| format!("table `{}` has no key `{kname}`", t.name))?;
        let k = &t.keys[i];
        let w = k.width;
        let m = match k.kind {
            MatchKind::Exact | MatchKind::Selector => FieldMatch::Exact(to_value(&parse_num(kval)?.value, w).map_err(|e| format!("key `{kname}`: {e}"))?),
            MatchKind::Ternary | MatchKind::Optional => {
                let n = parse_num(kval)?;
                if !n.based {
                    return Err(format!("ternary key `{kname}` must be written in hex or binary"));
                }
                let mut care = n.care.clone();
                care.resize(p4sec_ir::words_for(w) as usize, 0);
                let mask = to_value(&care, w).unwrap_or_else(|_| Value { width: w, words: ones(w) });
                let value = to_value(&n.value, w).map_err(|e| format!("key `{kname}`: {e}"))?;
                if k.kind == MatchKind::Optional {
                    FieldMatch::Optional(Some(value))
                } else {
                    FieldMatch::Ternary { value, mask }
                }
            }
            MatchKind::Lpm => {
                let (v, plen) = match kval.split_once('/') {
                    Some((v, l)) => (parse_num(v)?, Some(l.parse::<u32>().map_err(|_| format!("bad prefix length in `{kval}`"))?)),
                    None => (parse_num(kval)?, None),
                };
                let plen = plen.unwrap_or_else(|| if v.based { v.care.iter().map(|x| x.count_ones()).sum() } else { w });
                FieldMatch::Lpm { value: to_value(&v.value, w).map_err(|e| format!("key `{kname}`: {e}"))?, prefix_len: plen.min(w) }
            }
            MatchKind::Range => {
                let (lo, hi) = kval.split_once("->").ok_or_else(|| format!("range key `{kname}` needs LO->HI"))?;
                FieldMatch::Range { lo: to_value(&parse_num(lo)?.value, w)?, hi: to_value(&parse_num(hi)?.value, w)? }
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
    let acts: Vec<&str> = t.actions.iter().map(|a| prog.actions[a.action as usize].name.as_str()).collect();
    let ai = resolve(acts.iter().copied(), action, "action")?;
    let aidx = t.actions[ai].action;
    let act = &prog.actions[aidx as usize];
    let mut vals = vec![];
    for p in &act.params {
        let (_, v) = args.iter().find(|(n, _)| *n == p.name).ok_or_else(|| format!("action `{}` needs argument `{}`", act.name, p.name))?;
        vals.push(to_value(&parse_num(v)?.value, p.loc.width).map_err(|e| format!("argument `{}`: {e}", p.name))?);
    }
    let has_prio = t.keys.iter().any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range | MatchKind::Optional));
    let priority = if has_prio { priority.unwrap_or(0) as i32 } else { 0 };
    Ok(TableEntry { matches, action: ActionCall { action: aidx, args: vals }, priority })
}

/// The outcome of one STF test.
pub struct StfResult {
    pub passed: bool,
    pub messages: Vec<String>,
    pub warnings: Vec<String>,
}

/// Run STF text against a compiled program.
pub fn run_stf(prog: Program, stf: &str, trace: bool) -> StfResult {
    let mut messages = vec![];
    let mut warnings = vec![];
    let fail = |m: String| StfResult { passed: false, messages: vec![m], warnings: vec![] };
    let cmds = match parse_stf(stf) {
        Ok(c) => c,
        Err(e) => return fail(format!("bad STF file: {e}")),
    };
    // the STF runner's extern set: the switch's and the test externs (which only tests and this runner load)
    let mut externs = p4sec_engine::test_externs::registry();
    externs.extend(p4sec_externs::p4::registry());
    let engine = match Engine::new(Arc::new(prog), &externs) {
        Ok(e) => e,
        Err(e) => return fail(format!("cannot load the program: {e}")),
    };
    let prog = engine.prog.clone();
    let mut worker = Worker::new(&engine);
    worker.set_trace(trace);
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
                Cmd::Add { table, priority, keys, action, args } => {
                    let ti = resolve(prog.tables.iter().map(|t| t.name.as_str()), table, "table")?;
                    let e = build_entry(&prog, ti, *priority, keys, action, args)?;
                    engine.table_insert(ti, e)?;
                }
                Cmd::SetDefault { table, action, args } => {
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
                Cmd::CheckCounter { name, index, what, op, value } => {
                    let ci = resolve(prog.counters.iter().map(|c| c.name.as_str()), name, "counter")?;
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
                        return Err(format!("counter {name}({index}) {what} is {got}, expected {op} {value}"));
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
                    let ri = resolve(prog.registers.iter().map(|r| r.name.as_str()), name, "register")?;
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
                None => messages.push(format!("port {port}: missing packet {} (expect on line {ln}: {})", i + 1, pat.show())),
            }
        }
        for frame in got.iter().skip(exp.len()) {
            messages.push(format!("port {port}: unexpected packet {}", frame.iter().map(|b| format!("{b:02X}")).collect::<String>()));
        }
    }
    for (port, frames) in &emitted {
        if !watched.contains(port) {
            warnings.push(format!("{} packet(s) on unobserved port {port}", frames.len()));
        }
    }
    StfResult { passed: messages.is_empty(), messages, warnings }
}

/// Compile and run one program with one STF file.
pub fn run_one(p4: &Path, stf: &Path, trace: bool) -> StfResult {
    run_one_with(p4, stf, &[], &[], trace)
}

/// Compile `p4` with include directories and macro definitions, then run `stf` on it.
pub fn run_one_with(p4: &Path, stf: &Path, include: &[std::path::PathBuf], defines: &[(String, Option<String>)], trace: bool) -> StfResult {
    let text = match std::fs::read_to_string(stf) {
        Ok(t) => t,
        Err(e) => return StfResult { passed: false, messages: vec![format!("cannot read {}: {e}", stf.display())], warnings: vec![] },
    };
    let prog = match crate::compile(p4, include, defines) {
        Ok(p) => p,
        Err(e) => return StfResult { passed: false, messages: vec![format!("compile error: {e}")], warnings: vec![] },
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_stf(prog, &text, trace))) {
        Ok(r) => r,
        Err(_) => StfResult { passed: false, messages: vec!["internal error: the engine panicked (a bug)".into()], warnings: vec![] },
    }
}

pub fn run_one_cli(p4: &Path, stf: &Path, include: &[std::path::PathBuf], defines: &[(String, Option<String>)], trace: bool) -> ExitCode {
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

/// Run every NAME.p4 / NAME.stf pair in `dir`.
pub fn run_suite(dir: &Path, report: Option<&Path>) -> ExitCode {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".stf")).map(|s| s.to_string()))
            .filter(|n| dir.join(format!("{n}.p4")).exists())
            .collect(),
        Err(e) => {
            eprintln!("cannot read {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    names.sort();
    let (mut pass, mut fail) = (0, 0);
    let mut failures = vec![];
    for n in &names {
        let r = run_one(&dir.join(format!("{n}.p4")), &dir.join(format!("{n}.stf")), false);
        if r.passed {
            pass += 1;
            println!("PASS {n}");
        } else {
            fail += 1;
            let first = r.messages.first().cloned().unwrap_or_default();
            println!("FAIL {n}: {}", first.lines().next().unwrap_or(""));
            failures.push((n.clone(), r.messages));
        }
    }
    println!("{pass} passed, {fail} failed");
    if let Some(path) = report {
        let mut md = String::new();
        let _ = writeln!(md, "# STF conformance\n\nGenerated by `p4sec stf --suite {} --report {}`.\n", dir.display(), path.display());
        let _ = writeln!(md, "**{pass} passed, {fail} failed** of {} tests.\n", names.len());
        if !failures.is_empty() {
            let _ = writeln!(md, "## Failing tests\n");
            for (n, msgs) in &failures {
                let _ = writeln!(md, "### {n}\n\n```");
                for m in msgs.iter().take(6) {
                    let _ = writeln!(md, "{m}");
                }
                let _ = writeln!(md, "```\n");
            }
        }
        if let Err(e) = std::fs::write(path, md) {
            eprintln!("cannot write {}: {e}", path.display());
        }
    }
    if fail == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        let n = parse_num("0x0a01****").unwrap();
        assert_eq!(n.care[0].count_ones(), 16);
        assert_eq!(n.value[0], 0x0a010000);
        assert_eq!(parse_num("1113").unwrap().value[0], 1113);
        assert!(!parse_num("12").unwrap().based);
        assert!(parse_num("0xZZ").is_err());
    }

    #[test]
    fn patterns() {
        let p = Pattern::Nibbles(vec![Some(0xA), None, Some(1), Some(2)], false);
        assert!(p.matches(&[0xAF, 0x12, 0x99]));
        assert!(!p.matches(&[0xAF]));
        let e = Pattern::Nibbles(vec![Some(0xA), None], true);
        assert!(e.matches(&[0xA0]));
        assert!(!e.matches(&[0xA0, 0]));
    }

    #[test]
    fn stf_syntax_errors() {
        assert!(parse_stf("bogus 1 2").is_err());
        assert!(parse_stf("packet 0 0").is_err());
        assert!(parse_stf("expect 0 zz").is_err());
        let c = parse_stf("add t 10 k:0x0a a(x:1)\n").unwrap();
        assert!(matches!(&c[0].1, Cmd::Add { priority: Some(10), .. }));
    }
}
