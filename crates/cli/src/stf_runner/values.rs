//! Numbers as STF writes them: decimal, hex or binary with don't-care digits (`*`), and the
//! ternary (`value&&&mask`) and LPM values of table keys built from them.

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
}
