//! Expected-packet patterns: hex nibbles with `*` for any nibble and a trailing `$` for an exact
//! length, matched against an emitted frame.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
