//! Reading `.stf` files: numbers with don't-care digits, ternary and LPM values, packet patterns,
//! and the commands (`add`, `setdefault`, `packet`, `expect`, ...) of both the hand-written and the
//! p4testgen dialect.

use p4sec_ir::Value;

/// A number as written in STF: value, don't-care mask (1 = significant) and the number of bits
/// written.
#[derive(Clone, Debug)]
pub(super) struct Num {
    pub(super) value: Vec<u64>,
    pub(super) care: Vec<u64>,
    /// Written in hex or binary (ternary keys require it).
    pub(super) based: bool,
}

pub(super) fn set_bit(v: &mut Vec<u64>, i: u32) {
    let w = (i / 64) as usize;
    if v.len() <= w {
        v.resize(w + 1, 0);
    }
    v[w] |= 1 << (i % 64);
}

pub(super) fn parse_num(s: &str) -> Result<Num, String> {
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
            let d = c
                .to_digit(10)
                .ok_or_else(|| format!("malformed number `{s}`"))? as u128;
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
        return Ok(Num {
            care: vec![u64::MAX; value.len()],
            value,
            based: false,
        });
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
        let d = c
            .to_digit(radix)
            .ok_or_else(|| format!("malformed number `{s}`"))?;
        for b in 0..per {
            set_bit(&mut care, pos + b);
            if (d >> b) & 1 == 1 {
                set_bit(&mut value, pos + b);
            }
        }
    }
    Ok(Num {
        value,
        care,
        based: true,
    })
}

pub(super) fn to_value(v: &[u64], width: u32) -> Result<Value, String> {
    let n = p4sec_ir::words_for(width) as usize;
    let mut words = v.to_vec();
    words.resize(n.max(words.len()), 0);
    for (i, w) in words.iter().enumerate() {
        let lo = i as u32 * 64;
        let bad = if lo >= width {
            *w != 0
        } else {
            width - lo < 64 && (*w >> (width - lo)) != 0
        };
        if bad {
            return Err(format!("value does not fit in {width} bits"));
        }
    }
    words.truncate(n);
    Ok(Value { width, words })
}

/// A ternary key value: `VALUE&&&MASK`, or hex/binary digits with `*` for don't-care digits.
pub(super) fn ternary(text: &str, w: u32) -> Result<(Value, Value), String> {
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
    for (c, o) in care
        .iter_mut()
        .zip(ones.iter().chain(std::iter::repeat(&0)))
    {
        *c &= o;
    }
    for (v, m) in value.words.iter_mut().zip(&care) {
        *v &= m;
    }
    Ok((
        value,
        Value {
            width: w,
            words: care,
        },
    ))
}

pub(super) fn ones(width: u32) -> Vec<u64> {
    let mut v = vec![];
    for i in 0..width {
        set_bit(&mut v, i);
    }
    v
}

#[derive(Clone, Debug)]
pub(super) enum Pattern {
    /// Nibbles; None = `*`.
    Nibbles(Vec<Option<u8>>, bool),
    Any,
}

impl Pattern {
    pub(super) fn matches(&self, frame: &[u8]) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Nibbles(n, exact) => {
                // An odd number of digits: p4testgen prints the expected packet as one number, so a
                // leading zero nibble is dropped (when the parser stopped inside a byte, the frame
                // starts with the byte holding the first unparsed bit, as in BMv2, and the consumed
                // bits before it may all be 0; when they are unknown it writes `*`). The pattern
                // then stands for a frame starting with a 0 nibble.
                let pad = n.len() % 2;
                if frame.len() * 2 < n.len() + pad || (*exact && frame.len() * 2 != n.len() + pad) {
                    return false;
                }
                if pad == 1 && frame[0] >> 4 != 0 {
                    return false;
                }
                n.iter().enumerate().all(|(k, want)| {
                    let i = k + pad;
                    let b = frame[i / 2];
                    let got = if i % 2 == 0 { b >> 4 } else { b & 0xf };
                    want.map(|w| w == got).unwrap_or(true)
                })
            }
        }
    }
    pub(super) fn show(&self) -> String {
        match self {
            Pattern::Any => "(any)".into(),
            Pattern::Nibbles(n, exact) => {
                let mut s: String = n
                    .iter()
                    .map(|x| x.map(|d| format!("{d:X}")).unwrap_or("*".into()))
                    .collect();
                if *exact {
                    s.push_str(" $");
                }
                s
            }
        }
    }
}

#[derive(Clone, Debug)]
pub(super) enum Cmd {
    ExternControl(String, String, String),
    Packet(u32, Vec<u8>),
    Expect(u32, Pattern),
    Add {
        table: String,
        priority: Option<i64>,
        keys: Vec<(String, String)>,
        action: String,
        args: Vec<(String, String)>,
    },
    SetDefault {
        table: String,
        action: String,
        args: Vec<(String, String)>,
    },
    RemoveAll,
    CheckCounter {
        name: String,
        index: String,
        what: String,
        op: String,
        value: u64,
    },
    MirroringAdd(u32, u32),
    McMgrpCreate(u32),
    McNodeCreate(u32, Vec<u32>),
    McNodeAssociate(u32, u32),
    RegisterWrite(String, usize, String),
    Wait,
}

pub(super) fn hex_bytes(s: &str) -> Result<Vec<u8>, String> {
    let digits: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if digits.len() % 2 != 0 {
        return Err("odd number of hex digits in packet data".into());
    }
    (0..digits.len() / 2)
        .map(|i| {
            u8::from_str_radix(&digits[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("bad hex byte `{}`", &digits[2 * i..2 * i + 2]))
        })
        .collect()
}

pub(super) fn parse_u32(s: &str, what: &str) -> Result<u32, String> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x") {
        u32::from_str_radix(h, 16)
    } else {
        s.parse()
    };
    r.map_err(|_| format!("bad {what} `{s}`"))
}

/// Strip one pair of surrounding double quotes (p4testgen quotes table, key, action and parameter
/// names).
pub(super) fn unquote(s: &str) -> String {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(s)
        .to_string()
}

/// Split a line into tokens: whitespace separates them except inside double quotes and parentheses,
/// so `"t.a"("x":0x1, "y":2)` and `a(x:1, y:2)` are one token each.
pub(super) fn tokens(s: &str) -> Result<Vec<String>, String> {
    let mut out = vec![];
    let mut cur = String::new();
    let (mut quoted, mut depth) = (false, 0u32);
    for c in s.chars() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced `)` in `{s}`"))?
            }
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
pub(super) fn find_unquoted(s: &str, want: char) -> Option<usize> {
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
pub(super) fn parse_action(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    let s = s.trim();
    let Some(open) = find_unquoted(s, '(') else {
        return Ok((unquote(s), vec![]));
    };
    let close = s
        .rfind(')')
        .filter(|c| *c > open)
        .ok_or_else(|| format!("missing `)` in action `{s}`"))?;
    if !s[close + 1..].trim().is_empty() {
        return Err(format!(
            "unexpected `{}` after action `{}`",
            s[close + 1..].trim(),
            &s[..close + 1]
        ));
    }
    let name = unquote(&s[..open]);
    let mut args = vec![];
    let mut rest = &s[open + 1..close];
    while !rest.trim().is_empty() {
        let end = find_unquoted(rest, ',').unwrap_or(rest.len());
        let a = rest[..end].trim();
        rest = if end < rest.len() {
            &rest[end + 1..]
        } else {
            ""
        };
        if a.is_empty() {
            continue;
        }
        let colon = find_unquoted(a, ':')
            .ok_or_else(|| format!("action argument `{a}` needs the form name:value"))?;
        args.push((unquote(&a[..colon]), a[colon + 1..].trim().to_string()));
    }
    Ok((name, args))
}

/// Parse the operands of `add`: `TABLE [PRIORITY] KEY:VALUE... ACTION(ARGS) [= ID]`, names
/// optionally quoted.
pub(super) fn parse_add(rest: &str) -> Result<Cmd, String> {
    let mut toks = tokens(rest)?;
    if let Some(eq) = toks.iter().position(|t| t == "=") {
        toks.truncate(eq);
    }
    let mut toks = toks.into_iter().peekable();
    let table = unquote(&toks.next().ok_or("add needs a table")?);
    let mut priority = None;
    if let Some(t) = toks.peek() {
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            priority = Some(
                t.parse::<i64>()
                    .map_err(|_| format!("bad priority `{t}`"))?,
            );
            toks.next();
        }
    }
    let rest: Vec<String> = toks.collect();
    let Some((action_tok, key_toks)) = rest.split_last() else {
        return Err("add needs an action".into());
    };
    let mut keys = vec![];
    for tok in key_toks {
        let colon = find_unquoted(tok, ':')
            .ok_or_else(|| format!("key `{tok}` needs the form name:value"))?;
        keys.push((unquote(&tok[..colon]), tok[colon + 1..].to_string()));
    }
    let (action, args) = parse_action(action_tok)?;
    if action.is_empty() {
        return Err("add needs an action".into());
    }
    Ok(Cmd::Add {
        table,
        priority,
        keys,
        action,
        args,
    })
}

pub(super) fn parse_stf(text: &str) -> Result<Vec<(usize, Cmd)>, String> {
    let mut out = vec![];
    for (ln, raw) in text.lines().enumerate() {
        // `#` starts a comment outside double quotes only (a quoted name may hold one)
        let line = match find_unquoted(raw, '#') {
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
                Cmd::Packet(
                    parse_u32(p, "port").map_err(ctx)?,
                    hex_bytes(data).map_err(ctx)?,
                )
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
                            nib.push(Some(
                                c.to_digit(16)
                                    .ok_or_else(|| ctx(format!("bad hex digit `{c}` in expect")))?
                                    as u8,
                            ));
                        }
                    }
                    Cmd::Expect(port, Pattern::Nibbles(nib, exact))
                }
            }
            "add" => parse_add(rest).map_err(ctx)?,
            "setdefault" => {
                let toks = tokens(rest).map_err(ctx)?;
                let [t, a] = toks.as_slice() else {
                    return Err(ctx("setdefault needs TABLE ACTION(ARGS)".into()));
                };
                let (action, args) = parse_action(a).map_err(ctx)?;
                Cmd::SetDefault {
                    table: unquote(t),
                    action,
                    args,
                }
            }
            "remove" => Cmd::RemoveAll,
            "check_counter" => {
                // check_counter name(index) [packets|bytes op value]
                let open = find_unquoted(rest, '(')
                    .ok_or_else(|| ctx("check_counter needs name(index)".into()))?;
                let close = find_unquoted(&rest[open..], ')')
                    .map(|c| open + c)
                    .ok_or_else(|| ctx("check_counter needs name(index)".into()))?;
                let name = unquote(&rest[..open]);
                let index = rest[open + 1..close].trim().to_string();
                let tail: Vec<&str> = rest[close + 1..].split_whitespace().collect();
                let (what, op, value) = match tail.as_slice() {
                    [w, o, v] => (
                        w.to_string(),
                        o.to_string(),
                        v.parse::<u64>()
                            .map_err(|_| ctx(format!("bad counter value `{v}`")))?,
                    ),
                    [] => ("packets".to_string(), ">=".to_string(), 0),
                    _ => {
                        return Err(ctx(
                            "check_counter: expected `packets|bytes OP VALUE`".into()
                        ))
                    }
                };
                Cmd::CheckCounter {
                    name,
                    index,
                    what,
                    op,
                    value,
                }
            }
            // p4sec extension: a control-plane operation of an extern instance, with its JSON
            // argument
            "extern_control" => {
                let mut it = rest.splitn(3, char::is_whitespace);
                match (it.next(), it.next(), it.next()) {
                    (Some(inst), Some(op), Some(arg)) => {
                        Cmd::ExternControl(inst.to_string(), op.to_string(), arg.trim().to_string())
                    }
                    _ => return Err(ctx("extern_control needs INSTANCE OPERATION JSON".into())),
                }
            }
            "mirroring_add" => {
                let v: Vec<&str> = rest.split_whitespace().collect();
                if v.len() != 2 {
                    return Err(ctx("mirroring_add needs SESSION PORT".into()));
                }
                Cmd::MirroringAdd(
                    parse_u32(v[0], "session").map_err(ctx)?,
                    parse_u32(v[1], "port").map_err(ctx)?,
                )
            }
            "mc_mgrp_create" => Cmd::McMgrpCreate(parse_u32(rest, "group").map_err(ctx)?),
            "mc_node_create" => {
                let v: Vec<u32> = rest
                    .split_whitespace()
                    .map(|x| parse_u32(x, "number"))
                    .collect::<Result<_, _>>()
                    .map_err(ctx)?;
                if v.is_empty() {
                    return Err(ctx("mc_node_create needs RID PORT...".into()));
                }
                Cmd::McNodeCreate(v[0], v[1..].to_vec())
            }
            "mc_node_associate" => {
                let v: Vec<u32> = rest
                    .split_whitespace()
                    .map(|x| parse_u32(x, "number"))
                    .collect::<Result<_, _>>()
                    .map_err(ctx)?;
                if v.len() != 2 {
                    return Err(ctx("mc_node_associate needs GROUP NODE".into()));
                }
                Cmd::McNodeAssociate(v[0], v[1])
            }
            "register_write" => {
                let v = tokens(rest).map_err(ctx)?;
                if v.len() != 3 {
                    return Err(ctx("register_write needs NAME INDEX VALUE".into()));
                }
                Cmd::RegisterWrite(
                    unquote(&v[0]),
                    parse_u32(&v[1], "index").map_err(ctx)? as usize,
                    v[2].to_string(),
                )
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
        // an odd digit count (p4testgen dropped a leading zero nibble): the frame starts with a 0
        // nibble
        let odd = Pattern::Nibbles(vec![Some(0x2), Some(0x2), Some(0xF)], true);
        assert!(odd.matches(&[0x02, 0x2F]));
        assert!(!odd.matches(&[0x12, 0x2F]));
        assert!(!odd.matches(&[0x22, 0xF0]));
        assert!(!odd.matches(&[0x02, 0x2F, 0x00]));
        assert!(
            Pattern::Nibbles(vec![Some(0x2), Some(0x2), Some(0xF)], false)
                .matches(&[0x02, 0x2F, 0x77])
        );
    }

    #[test]
    fn p4testgen_dialect() {
        let c = parse_stf(
            "# comment block\nadd \"MyIngress.ipv4_lpm\" 1 \"hdr.ipv4.dstAddr\":0b1010**** \"hdr.h[h.i.index].a\":0x0A \"MyIngress.fwd\"(\"port\":0x01,\"mac\":0x02)\n\
             setdefault \"MyIngress.t\" \"NoAction\"()\nmirroring_add 64 461\nexpect 0 *4A5$\n",
        )
        .unwrap();
        let Cmd::Add {
            table,
            priority,
            keys,
            action,
            args,
        } = &c[0].1
        else {
            panic!("not an add: {:?}", c[0])
        };
        assert_eq!(table, "MyIngress.ipv4_lpm");
        assert_eq!(*priority, Some(1));
        assert_eq!(
            keys[0],
            ("hdr.ipv4.dstAddr".to_string(), "0b1010****".to_string())
        );
        assert_eq!(keys[1].0, "hdr.h[h.i.index].a");
        assert_eq!(action, "MyIngress.fwd");
        assert_eq!(
            args,
            &[
                ("port".to_string(), "0x01".to_string()),
                ("mac".to_string(), "0x02".to_string())
            ]
        );
        assert!(
            matches!(&c[1].1, Cmd::SetDefault { table, action, args } if table == "MyIngress.t" && action == "NoAction" && args.is_empty())
        );
        assert!(matches!(c[2].1, Cmd::MirroringAdd(64, 461)));
        let Cmd::Expect(0, pat) = &c[3].1 else {
            panic!("not an expect")
        };
        assert!(pat.matches(&[0x14, 0xA5]) && pat.matches(&[0xF4, 0xA5]));
        assert!(!pat.matches(&[0x14, 0xA6]) && !pat.matches(&[0x14, 0xA5, 0]));
        // hand-written forms still parse: unquoted names, spaces in the argument list, an entry id
        let c = parse_stf("add t k:1 a(x:1, y:2) = 7\n").unwrap();
        assert!(
            matches!(&c[0].1, Cmd::Add { action, args, .. } if action == "a" && args.len() == 2)
        );
        assert!(parse_stf("add \"t k:1 a()\n").is_err());
    }

    /// The characters STF reserves (`#` comments, blanks, `(`, `)`, `:`, `,`, `=`) are plain
    /// characters inside a quoted name, in every command that takes names.
    #[test]
    fn reserved_characters_in_quoted_names() {
        let c = parse_stf(
            "add \"t#1 (x)\" 2 \"k:#,=\":0x1 \"a#b\"(\"p(1),#\":0x2) # a real comment\n\
             setdefault \"t#1 (x)\" \"a#b\"()\n\
             check_counter \"c#(x)\"(3) packets == 1\n\
             register_write \"r# 1\" 4 5 # comment\n",
        )
        .unwrap();
        let Cmd::Add {
            table,
            priority,
            keys,
            action,
            args,
        } = &c[0].1
        else {
            panic!("not an add: {:?}", c[0])
        };
        assert_eq!(
            (table.as_str(), *priority, action.as_str()),
            ("t#1 (x)", Some(2), "a#b")
        );
        assert_eq!(keys, &[("k:#,=".to_string(), "0x1".to_string())]);
        assert_eq!(args, &[("p(1),#".to_string(), "0x2".to_string())]);
        assert!(
            matches!(&c[1].1, Cmd::SetDefault { table, action, .. } if table == "t#1 (x)" && action == "a#b")
        );
        assert!(
            matches!(&c[2].1, Cmd::CheckCounter { name, index, value: 1, .. } if name == "c#(x)" && index == "3")
        );
        assert!(matches!(&c[3].1, Cmd::RegisterWrite(name, 4, v) if name == "r# 1" && v == "5"));
        // an unquoted `#` still starts a comment
        assert!(matches!(
            parse_stf("add t k:1 a() # \"x\n").unwrap()[0].1,
            Cmd::Add { .. }
        ));
    }

    #[test]
    fn ternary_and_lpm_values() {
        let (v, m) = ternary("0x12&&&0xF0", 8).unwrap();
        assert_eq!((v.words[0], m.words[0]), (0x10, 0xF0));
        let (v, m) = ternary("0b1*0*", 4).unwrap();
        assert_eq!((v.words[0], m.words[0]), (0b1000, 0b1010));
        assert!(ternary("12", 8).is_err());
        // a mask wider than the key keeps the key's bits only; a value that does not fit is an
        // error
        let (_, m) = ternary("0x01&&&0x1FF", 8).unwrap();
        assert_eq!(m.words[0], 0xFF);
        assert!(ternary("0x1FF", 8).is_err());
    }

    #[test]
    fn stf_syntax_errors() {
        assert!(parse_stf("bogus 1 2").is_err());
        assert!(parse_stf("packet 0 0").is_err());
        assert!(parse_stf("expect 0 zz").is_err());
        let c = parse_stf("add t 10 k:0x0a a(x:1)\n").unwrap();
        assert!(matches!(
            &c[0].1,
            Cmd::Add {
                priority: Some(10),
                ..
            }
        ));
    }
}
