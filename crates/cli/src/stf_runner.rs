//! The STF ("simple test framework") runner: parses `.stf` files (see conformance/STF-FORMAT.md in the shared corpora, `$P4SEC_SHARED`),
//! drives the engine, and compares emitted frames with the expectations.

/// How far the STF runner's virtual clock moves per packet (µs).
pub const STF_CLOCK_STEP_US: u64 = 1000;

use p4sec_engine::{Engine, Outputs, Worker};
use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Program, TableEntry, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
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

/// A ternary key value: `VALUE&&&MASK`, or hex/binary digits with `*` for don't-care digits.
fn ternary(text: &str, w: u32) -> Result<(Value, Value), String> {
    let (value, care) = match text.split_once("&&&") {
        Some((v, m)) => (parse_num(v)?.value, parse_num(m)?.value),
        None => {
            let n = parse_num(text)?;
            if !n.based {
                return Err(format!("a ternary value must be written in hex or binary or as VALUE&&&MASK, not `{text}`"));
            }
            (n.value, n.care)
        }
    };
    let mut value = to_value(&value, w)?;
    // a mask wider than the key (leading hex digits) keeps only the key's bits
    let mut care = care;
    care.truncate(p4sec_ir::words_for(w) as usize);
    care.resize(p4sec_ir::words_for(w) as usize, 0);
    let ones = ones(w);
    for (c, o) in care.iter_mut().zip(ones.iter().chain(std::iter::repeat(&0))) {
        *c &= o;
    }
    for (v, m) in value.words.iter_mut().zip(&care) {
        *v &= m;
    }
    Ok((value, Value { width: w, words: care }))
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
    (0..digits.len() / 2)
        .map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| format!("bad hex byte `{}`", &digits[2 * i..2 * i + 2])))
        .collect()
}

fn parse_u32(s: &str, what: &str) -> Result<u32, String> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x") { u32::from_str_radix(h, 16) } else { s.parse() };
    r.map_err(|_| format!("bad {what} `{s}`"))
}

/// Strip one pair of surrounding double quotes (p4testgen quotes table, key, action and parameter names).
fn unquote(s: &str) -> String {
    let s = s.trim();
    s.strip_prefix('"').and_then(|x| x.strip_suffix('"')).unwrap_or(s).to_string()
}

/// Split a line into tokens: whitespace separates them except inside double quotes and parentheses, so
/// `"t.a"("x":0x1, "y":2)` and `a(x:1, y:2)` are one token each.
fn tokens(s: &str) -> Result<Vec<String>, String> {
    let mut out = vec![];
    let mut cur = String::new();
    let (mut quoted, mut depth) = (false, 0u32);
    for c in s.chars() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.checked_sub(1).ok_or_else(|| format!("unbalanced `)` in `{s}`"))?,
            c if c.is_whitespace() && !quoted && depth == 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                continue;
            }
            _ => {}
        }
        // `act (x:1)`: a parenthesised group belongs to the name before it
        if c == '(' && !quoted && depth == 1 && cur.is_empty() && !out.is_empty() {
            cur = out.pop().unwrap_or_default();
        }
        cur.push(c);
    }
    if quoted {
        return Err(format!("unterminated `\"` in `{s}`"));
    }
    if depth != 0 {
        return Err(format!("missing `)` in `{s}`"));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

/// The position of the first `c` outside double quotes.
fn find_unquoted(s: &str, want: char) -> Option<usize> {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == want && !quoted {
            return Some(i);
        }
    }
    None
}

/// Split `name(a:1, b:2)` (names possibly quoted) into name and argument pairs.
fn parse_action(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    let s = s.trim();
    let Some(open) = find_unquoted(s, '(') else { return Ok((unquote(s), vec![])) };
    let close = s.rfind(')').filter(|c| *c > open).ok_or_else(|| format!("missing `)` in action `{s}`"))?;
    if !s[close + 1..].trim().is_empty() {
        return Err(format!("unexpected `{}` after action `{}`", s[close + 1..].trim(), &s[..close + 1]));
    }
    let name = unquote(&s[..open]);
    let mut args = vec![];
    let mut rest = &s[open + 1..close];
    while !rest.trim().is_empty() {
        let end = find_unquoted(rest, ',').unwrap_or(rest.len());
        let a = rest[..end].trim();
        rest = if end < rest.len() { &rest[end + 1..] } else { "" };
        if a.is_empty() {
            continue;
        }
        let colon = find_unquoted(a, ':').ok_or_else(|| format!("action argument `{a}` needs the form name:value"))?;
        args.push((unquote(&a[..colon]), a[colon + 1..].trim().to_string()));
    }
    Ok((name, args))
}

/// Parse the operands of `add`: `TABLE [PRIORITY] KEY:VALUE... ACTION(ARGS) [= ID]`, names optionally quoted.
fn parse_add(rest: &str) -> Result<Cmd, String> {
    let mut toks = tokens(rest)?;
    if let Some(eq) = toks.iter().position(|t| t == "=") {
        toks.truncate(eq);
    }
    let mut toks = toks.into_iter().peekable();
    let table = unquote(&toks.next().ok_or("add needs a table")?);
    let mut priority = None;
    if let Some(t) = toks.peek() {
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            priority = Some(t.parse::<i64>().map_err(|_| format!("bad priority `{t}`"))?);
            toks.next();
        }
    }
    let rest: Vec<String> = toks.collect();
    let Some((action_tok, key_toks)) = rest.split_last() else { return Err("add needs an action".into()) };
    let mut keys = vec![];
    for tok in key_toks {
        let colon = find_unquoted(tok, ':').ok_or_else(|| format!("key `{tok}` needs the form name:value"))?;
        keys.push((unquote(&tok[..colon]), tok[colon + 1..].to_string()));
    }
    let (action, args) = parse_action(action_tok)?;
    if action.is_empty() {
        return Err("add needs an action".into());
    }
    Ok(Cmd::Add { table, priority, keys, action, args })
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
            "add" => parse_add(rest).map_err(ctx)?,
            "setdefault" => {
                let toks = tokens(rest).map_err(ctx)?;
                let [t, a] = toks.as_slice() else { return Err(ctx("setdefault needs TABLE ACTION(ARGS)".into())) };
                let (action, args) = parse_action(a).map_err(ctx)?;
                Cmd::SetDefault { table: unquote(t), action, args }
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
            "no_packet"
            | "mirroring_add_mc"
            | "mirroring_delete"
            | "mirroring_get"
            | "mc_node_update"
            | "counter_read"
            | "counter_write"
            | "register_read"
            | "register_reset"
            | "meter_get_rates"
            | "meter_set_rates"
            | "meter_array_set_rates" => Cmd::Wait,
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
        let m: Vec<usize> =
            names.clone().enumerate().filter(|(_, n)| if dotted { n.ends_with(&format!(".{want}")) } else { n.ends_with(want) }).map(|(i, _)| i).collect();
        match m.len() {
            1 => return Ok(m[0]),
            0 => continue,
            _ => return Err(format!("{what} `{want}` is ambiguous")),
        }
    }
    // The same local name under another prefix: p4testgen writes the control's type name where the reference
    // compiler names the control by its `@name` annotation (`IngressI.red` for `altIngressName.red`).
    let last = |n: &str| n.rsplit('.').next().unwrap_or(n).to_string();
    let m: Vec<usize> = names.enumerate().filter(|(_, n)| last(n) == last(want)).map(|(i, _)| i).collect();
    if let [i] = m.as_slice() {
        return Ok(*i);
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

fn build_entry(
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
        // a key that is an expression may be spelled differently (`a & 0x1` for `a&0x01`), or a field renamed by
        // `@name`: when every key is given, in order, the position decides
        let i = t
            .keys
            .iter()
            .position(|k| k.name == *kname)
            .or_else(|| t.keys.iter().position(|k| key_name_matches(&k.name, kname)))
            .or(if keys.len() == t.keys.len() { Some(pos) } else { None })
            .ok_or_else(|| format!("table `{}` has no key `{kname}`", t.name))?;
        if matches[i].is_some() {
            return Err(format!("table `{}`: key `{}` given twice", t.name, t.keys[i].name));
        }
        let k = &t.keys[i];
        let w = k.width;
        let m = match k.kind {
            MatchKind::Exact | MatchKind::Selector => FieldMatch::Exact(to_value(&parse_num(kval)?.value, w).map_err(|e| format!("key `{kname}`: {e}"))?),
            MatchKind::Ternary | MatchKind::Optional => {
                let (value, mask) = ternary(kval, w).map_err(|e| format!("key `{kname}`: {e}"))?;
                if k.kind == MatchKind::Optional {
                    match mask.words.iter().map(|x| x.count_ones()).sum::<u32>() {
                        0 => FieldMatch::Optional(None),
                        n if n == w => FieldMatch::Optional(Some(value)),
                        _ => return Err(format!("optional key `{kname}` must be all don't-care or exact, not `{kval}`")),
                    }
                } else {
                    FieldMatch::Ternary { value, mask }
                }
            }
            MatchKind::Lpm => {
                let (value, plen) = match kval.split_once('/') {
                    Some((v, l)) => (parse_num(v)?.value, l.trim().parse::<u32>().map_err(|_| format!("bad prefix length in `{kval}`"))?),
                    None if kval.contains("&&&") || parse_num(kval)?.based => {
                        let (value, mask) = ternary(kval, w).map_err(|e| format!("key `{kname}`: {e}"))?;
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
                FieldMatch::Lpm { value, prefix_len: plen }
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
    for (pos, p) in act.params.iter().enumerate() {
        // a parameter renamed by `@name` (p4testgen writes the annotation's name): the position decides when
        // every argument is given
        let by_pos = if args.len() == act.params.len() { args.get(pos) } else { None };
        let (_, v) = args.iter().find(|(n, _)| *n == p.name).or(by_pos).ok_or_else(|| format!("action `{}` needs argument `{}`", act.name, p.name))?;
        vals.push(to_value(&parse_num(v)?.value, p.loc.width).map_err(|e| format!("argument `{}`: {e}", p.name))?);
    }
    let has_prio = t.keys.iter().any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range | MatchKind::Optional));
    let priority = if has_prio { priority.unwrap_or(0) as i32 } else { 0 };
    Ok(TableEntry { matches, action: ActionCall { action: aidx, args: vals }, priority })
}

/// The outcome of one STF test.
#[derive(Default)]
pub struct StfResult {
    pub passed: bool,
    pub messages: Vec<String>,
    pub warnings: Vec<String>,
    /// Ports that emitted packets although the test neither sent nor expected any there (a warning in the
    /// reference runner's convention; a failure for generated tests, which predict every output).
    pub stray_ports: Vec<u32>,
}

impl StfResult {
    fn failed(m: String) -> Self {
        StfResult { passed: false, messages: vec![m], ..Default::default() }
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
    // deterministic time fields: a virtual clock at 0 for the first packet, 1,000 µs later for each next one
    // (queue depths stay 0: no queueing here); see docs/switch.md, "Traffic manager"
    worker.set_virtual_clock(0, STF_CLOCK_STEP_US);
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
    let mut stray_ports = vec![];
    for (port, frames) in &emitted {
        if !watched.contains(port) {
            warnings.push(format!("{} packet(s) on unobserved port {port}", frames.len()));
            stray_ports.push(*port);
        }
    }
    StfResult { passed: messages.is_empty(), messages, warnings, stray_ports }
}

/// Compile `p4` with include directories and macro definitions, then run `stf` on it.
pub fn run_one_with(p4: &Path, stf: &Path, include: &[std::path::PathBuf], defines: &[(String, Option<String>)], trace: bool) -> StfResult {
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

/// One program of a suite and its tests.
struct SuiteProgram {
    p4: PathBuf,
    /// (test name, STF file, generated): a generated test (`NAME/NAME_k.stf`) predicts every output packet.
    tests: Vec<(String, PathBuf, bool)>,
}

/// The programs of a suite folder: `NAME.p4` with `NAME.stf` (hand-written tests) and/or a folder `NAME/` of
/// `.stf` files (generated tests, e.g. by p4testgen), each run on a fresh switch.
fn collect_suite(dir: &Path) -> Result<Vec<SuiteProgram>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut names: Vec<String> =
        rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".p4")).map(|s| s.to_string())).collect();
    names.sort();
    let mut out = vec![];
    for n in names {
        let mut tests = vec![];
        let single = dir.join(format!("{n}.stf"));
        if single.is_file() {
            tests.push((n.clone(), single, false));
        }
        let sub = dir.join(&n);
        if sub.is_dir() {
            let rd = std::fs::read_dir(&sub).map_err(|e| format!("cannot read {}: {e}", sub.display()))?;
            let mut gen: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "stf")).collect();
            // NAME_2 before NAME_10
            gen.sort_by_key(|p| {
                let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
                let digits = stem.chars().rev().take_while(|c| c.is_ascii_digit()).count();
                let (head, num) = stem.split_at(stem.len() - digits);
                (head.to_string(), num.parse::<u64>().unwrap_or(0), stem.clone())
            });
            for p in gen {
                let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
                tests.push((format!("{n}/{stem}"), p, true));
            }
        }
        if !tests.is_empty() {
            out.push(SuiteProgram { p4: dir.join(format!("{n}.p4")), tests });
        }
    }
    Ok(out)
}

/// Compile one suite program once (its folder on the include path) and run each of its tests on a fresh switch.
fn run_suite_program(dir: &Path, sp: &SuiteProgram) -> Vec<(String, StfResult)> {
    let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile(&sp.p4, &[dir.to_path_buf()], &[])));
    let prog = match compiled {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return sp.tests.iter().map(|(n, _, _)| (n.clone(), StfResult::failed(format!("compile error: {e}")))).collect(),
        Err(_) => return sp.tests.iter().map(|(n, _, _)| (n.clone(), StfResult::failed("internal error: the compiler panicked (a bug)".into()))).collect(),
    };
    let mut out = vec![];
    for (name, stf, generated) in &sp.tests {
        let r = match std::fs::read_to_string(stf) {
            Err(e) => StfResult::failed(format!("cannot read {}: {e}", stf.display())),
            Ok(text) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_stf(prog.clone(), &text, false))) {
                Err(_) => StfResult::failed("internal error: the engine panicked (a bug)".into()),
                Ok(mut r) => {
                    if *generated && !r.stray_ports.is_empty() {
                        r.passed = false;
                        let ports: Vec<String> = r.stray_ports.iter().map(|p| p.to_string()).collect();
                        r.messages.push(format!("packets on port(s) {} that the test does not expect", ports.join(", ")));
                    }
                    r
                }
            },
        };
        out.push((name.clone(), r));
    }
    out
}

/// The reasons written for failing programs: lines `PROGRAM: reason` (`#` starts a comment line).
fn read_notes(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line.split_once(": ").ok_or_else(|| format!("{}:{}: expected `PROGRAM: reason`", path.display(), i + 1))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// What kind of failure a test's first message shows.
fn failure_class(msg: &str) -> &'static str {
    if msg.starts_with("compile error") {
        "compile refusal"
    } else if msg.starts_with("cannot load") {
        "load refusal"
    } else if msg.starts_with("internal error") {
        "panic"
    } else if msg.starts_with("bad STF file") || (msg.starts_with("line ") && !msg.contains("expect")) {
        "control-plane command refused"
    } else {
        "wrong output"
    }
}

/// The Markdown section of one suite: counts, then one row per program with failing tests.
fn report_section(dir: &Path, cmd: &str, results: &[(String, StfResult)], programs: usize, notes: &BTreeMap<String, String>) -> String {
    let title = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| dir.display().to_string());
    let pass = results.iter().filter(|(_, r)| r.passed).count();
    let mut md = String::new();
    let _ = writeln!(md, "## {title}\n\nGenerated by `{cmd}`.\n");
    let _ = writeln!(md, "**{pass} passed, {} failed** of {} tests ({programs} programs).\n", results.len() - pass, results.len());
    // program -> (tests, failed test names, first message of the first failure)
    let mut by_prog: Vec<(String, usize, Vec<String>, String)> = vec![];
    for (n, r) in results {
        let (prog, test) = match n.split_once('/') {
            Some((p, t)) => (p.to_string(), t.to_string()),
            None => (n.clone(), n.clone()),
        };
        if by_prog.last().is_none_or(|l| l.0 != prog) {
            by_prog.push((prog, 0, vec![], String::new()));
        }
        let Some(last) = by_prog.last_mut() else { continue };
        last.1 += 1;
        if !r.passed {
            if last.2.is_empty() {
                last.3 = r.messages.first().and_then(|m| m.lines().next()).unwrap_or("").to_string();
            }
            last.2.push(test.rsplit('_').next().filter(|k| k.chars().all(|c| c.is_ascii_digit())).map(|k| format!("_{k}")).unwrap_or(test));
        }
    }
    if pass < results.len() {
        let _ = writeln!(md, "| Program | Failed | Class | Reason | First message |\n|---|---|---|---|---|");
        let cell = |s: &str| s.replace('|', "\\|").replace(&format!("{}/", dir.display()), "");
        for (prog, n, failed, first) in by_prog.iter().filter(|p| !p.2.is_empty()) {
            let which = if *n > 1 { format!("{}/{n} ({})", failed.len(), failed.join(" ")) } else { "1/1".to_string() };
            let reason = notes.get(prog).map(|r| cell(r)).unwrap_or_else(|| "(not analysed)".into());
            let mut first = cell(first).replace('`', "'");
            if first.chars().count() > 140 {
                first = first.chars().take(140).collect::<String>() + "...";
            }
            let _ = writeln!(md, "| {prog} | {which} | {} | {reason} | `{first}` |", failure_class(&first));
        }
        md.push('\n');
    }
    md
}

/// Put `section` (starting `## TITLE`) into a report in place of the section with the same title, or at the end.
fn replace_section(old: &str, section: &str) -> String {
    let title = section.lines().next().unwrap_or("");
    let mut out = String::from("# STF conformance\n\nOne section per suite, each regenerated by the command it shows.\n\n");
    let mut kept = vec![];
    let mut cur: Option<(String, String)> = None;
    for line in old.lines() {
        if line.starts_with("## ") {
            kept.extend(cur.take());
            cur = Some((line.to_string(), String::new()));
        }
        if let Some((_, body)) = cur.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    kept.extend(cur);
    let mut placed = false;
    for (t, body) in kept {
        if t == title {
            out.push_str(section);
            placed = true;
        } else {
            out.push_str(&body);
        }
    }
    if !placed {
        out.push_str(section);
    }
    out
}

/// Run every test of the suite folder `dir` (see `collect_suite`), programs spread over the available cores.
pub fn run_suite(dir: &Path, report: Option<&Path>, notes: Option<&Path>) -> ExitCode {
    let programs = match collect_suite(dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let start = std::time::Instant::now();
    let jobs = std::env::var("P4SEC_STF_JOBS")
        .ok()
        .and_then(|j| j.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
        .clamp(1, programs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Vec<(String, StfResult)>>>> = std::sync::Mutex::new((0..programs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(sp) = programs.get(i) else { break };
                let r = run_suite_program(dir, sp);
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
            });
        }
    });
    let results: Vec<(String, StfResult)> = results.into_inner().unwrap_or_default().into_iter().flatten().flatten().collect();
    let (mut pass, mut fail) = (0, 0);
    for (n, r) in &results {
        if r.passed {
            pass += 1;
            println!("PASS {n}");
        } else {
            fail += 1;
            let first = r.messages.first().cloned().unwrap_or_default();
            println!("FAIL {n}: {}", first.lines().next().unwrap_or(""));
        }
    }
    eprintln!("{} tests of {} programs in {:.1} s ({jobs} threads)", results.len(), programs.len(), start.elapsed().as_secs_f64());
    println!("{pass} passed, {fail} failed");
    if let Some(path) = report {
        // the shared corpora named through their variable, so the report reads the same on every machine
        let shown = std::env::var("P4SEC_SHARED")
            .ok()
            .and_then(|b| dir.strip_prefix(&b).ok().map(|r| format!("$P4SEC_SHARED/{}", r.display())))
            .unwrap_or_else(|| dir.display().to_string());
        let cmd = format!("p4sec stf --suite {shown} --report {}{}", path.display(), notes.map(|n| format!(" --notes {}", n.display())).unwrap_or_default());
        let notes = match notes.map(read_notes).transpose() {
            Ok(n) => n.unwrap_or_default(),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        let section = report_section(dir, &cmd, &results, programs.len(), &notes);
        let old = std::fs::read_to_string(path).unwrap_or_default();
        if let Err(e) = std::fs::write(path, replace_section(&old, &section)) {
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
    fn p4testgen_dialect() {
        let c = parse_stf(
            "# comment block\nadd \"MyIngress.ipv4_lpm\" 1 \"hdr.ipv4.dstAddr\":0b1010**** \"hdr.h[h.i.index].a\":0x0A \"MyIngress.fwd\"(\"port\":0x01,\"mac\":0x02)\n\
             setdefault \"MyIngress.t\" \"NoAction\"()\nmirroring_add 64 461\nexpect 0 *4A5$\n",
        )
        .unwrap();
        let Cmd::Add { table, priority, keys, action, args } = &c[0].1 else { panic!("not an add: {:?}", c[0]) };
        assert_eq!(table, "MyIngress.ipv4_lpm");
        assert_eq!(*priority, Some(1));
        assert_eq!(keys[0], ("hdr.ipv4.dstAddr".to_string(), "0b1010****".to_string()));
        assert_eq!(keys[1].0, "hdr.h[h.i.index].a");
        assert_eq!(action, "MyIngress.fwd");
        assert_eq!(args, &[("port".to_string(), "0x01".to_string()), ("mac".to_string(), "0x02".to_string())]);
        assert!(matches!(&c[1].1, Cmd::SetDefault { table, action, args } if table == "MyIngress.t" && action == "NoAction" && args.is_empty()));
        assert!(matches!(c[2].1, Cmd::MirroringAdd(64, 461)));
        let Cmd::Expect(0, pat) = &c[3].1 else { panic!("not an expect") };
        assert!(pat.matches(&[0x14, 0xA5]) && pat.matches(&[0xF4, 0xA5]));
        assert!(!pat.matches(&[0x14, 0xA6]) && !pat.matches(&[0x14, 0xA5, 0]));
        // hand-written forms still parse: unquoted names, spaces in the argument list, an entry id
        let c = parse_stf("add t k:1 a(x:1, y:2) = 7\n").unwrap();
        assert!(matches!(&c[0].1, Cmd::Add { action, args, .. } if action == "a" && args.len() == 2));
        assert!(parse_stf("add \"t k:1 a()\n").is_err());
    }

    #[test]
    fn ternary_and_lpm_values() {
        let (v, m) = ternary("0x12&&&0xF0", 8).unwrap();
        assert_eq!((v.words[0], m.words[0]), (0x10, 0xF0));
        let (v, m) = ternary("0b1*0*", 4).unwrap();
        assert_eq!((v.words[0], m.words[0]), (0b1000, 0b1010));
        assert!(ternary("12", 8).is_err());
        // a mask wider than the key keeps the key's bits only; a value that does not fit is an error
        let (_, m) = ternary("0x01&&&0x1FF", 8).unwrap();
        assert_eq!(m.words[0], 0xFF);
        assert!(ternary("0x1FF", 8).is_err());
    }

    #[test]
    fn report_sections_are_replaced_in_place() {
        let a = replace_section("", "## one\n\nfirst\n");
        let b = replace_section(&a, "## two\n\nsecond\n");
        let c = replace_section(&b, "## one\n\nagain\n");
        assert!(c.contains("again") && c.contains("second") && !c.contains("first"));
        assert!(c.find("## one").unwrap() < c.find("## two").unwrap());
        assert_eq!(failure_class("compile error: x.p4:1:1: error: y"), "compile refusal");
        assert_eq!(failure_class("port 0, packet 1 (expect on line 4): expected 00"), "wrong output");
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

/// Compile `path` with include directories and macro definitions (errors as their located text).
fn compile(path: &Path, include: &[std::path::PathBuf], defines: &[(String, Option<String>)]) -> Result<Program, String> {
    let opts = p4sec_frontend::CompileOptions { include_dirs: include.to_vec(), defines: defines.to_vec() };
    p4sec_frontend::compile_file(path, &opts).map_err(|e| e.to_string())
}
