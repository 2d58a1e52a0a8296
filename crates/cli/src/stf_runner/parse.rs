//! Reading `.stf` files into commands (`add`, `setdefault`, `packet`, `expect`, ...) of both the
//! hand-written and the p4testgen dialect: tokens, quoted names, action calls, packet data. The
//! numbers in them are read by `values.rs`, the expected packets by `pattern.rs`.

use super::pattern::Pattern;

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
    if !digits.len().is_multiple_of(2) {
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
