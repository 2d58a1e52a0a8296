//! `dfa_matcher`: scan the packet payload with a deterministic automaton in one pass (the
//! single-pass variant of in-network pattern matching that DeeP4R proposes for targets that allow
//! it).
//!
//! The automaton is data, not code: the control plane loads it (`load`, JSON) and may replace it at
//! run time without stopping traffic (packets see the old or the new automaton, never a mix). Bytes
//! are first mapped to symbol classes by one of several class maps (e.g. text and DNS wire format),
//! then each class moves the automaton through a dense transition table. Accepting states are
//! absorbing for the verdict.

use crate::iface::{BitBuf, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload};
use std::sync::{Arc, RwLock};

/// One loaded automaton.
#[derive(Debug)]
pub struct Automaton {
    classes: usize,
    /// Per mode: byte → class, and the state to start in.
    maps: Vec<([u8; 256], u32)>,
    /// `delta[state * classes + class]`.
    delta: Vec<u32>,
    accept: Vec<bool>,
    /// The class that ends a name (appended after the scanned bytes).
    end_class: u8,
}

#[derive(serde::Deserialize)]
struct AutomatonJson {
    states: u32,
    classes: u32,
    end_class: u8,
    /// Per mode: 256 classes and the start state.
    modes: Vec<(Vec<u8>, u32)>,
    /// Transitions that do not lead to state 0: (state, class, next).
    transitions: Vec<(u32, u8, u32)>,
    accept: Vec<u32>,
}

impl Automaton {
    pub fn from_json(text: &[u8]) -> Result<Automaton, String> {
        let j: AutomatonJson =
            serde_json::from_slice(text).map_err(|e| format!("dfa_matcher: bad automaton: {e}"))?;
        if j.states == 0 || j.states > 1 << 26 || j.classes == 0 || j.classes > 256 {
            return Err(format!(
                "dfa_matcher: {} states of {} classes is out of range",
                j.states, j.classes
            ));
        }
        let (n, c) = (j.states as usize, j.classes as usize);
        if j.end_class as usize >= c {
            return Err(format!(
                "dfa_matcher: end class {} is not below {c}",
                j.end_class
            ));
        }
        let mut maps = vec![];
        for (i, (m, start)) in j.modes.iter().enumerate() {
            let arr: [u8; 256] = m.as_slice().try_into().map_err(|_| {
                format!(
                    "dfa_matcher: mode {i}: the class map must have 256 entries, not {}",
                    m.len()
                )
            })?;
            if arr.iter().any(|x| *x as usize >= c) || *start as usize >= n {
                return Err(format!(
                    "dfa_matcher: mode {i}: class or start state out of range"
                ));
            }
            maps.push((arr, *start));
        }
        let mut delta = vec![0u32; n * c];
        for (s, cl, t) in &j.transitions {
            if *s as usize >= n || *cl as usize >= c || *t as usize >= n {
                return Err(format!(
                    "dfa_matcher: transition ({s}, {cl}) -> {t} out of range"
                ));
            }
            delta[*s as usize * c + *cl as usize] = *t;
        }
        let mut accept = vec![false; n];
        for s in &j.accept {
            *accept
                .get_mut(*s as usize)
                .ok_or_else(|| format!("dfa_matcher: accepting state {s} out of range"))? = true;
        }
        Ok(Automaton {
            classes: c,
            maps,
            delta,
            accept,
            end_class: j.end_class,
        })
    }

    /// Scan `data` in `mode`, followed by the end class; true when an accepting state is reached.
    pub fn matches(&self, mode: usize, data: &[u8]) -> Option<bool> {
        let (map, start) = self.maps.get(mode)?;
        let mut s = *start as usize;
        if self.accept[s] {
            return Some(true);
        }
        for b in data {
            s = self.delta[s * self.classes + map[*b as usize] as usize] as usize;
            if self.accept[s] {
                return Some(true);
            }
        }
        s = self.delta[s * self.classes + self.end_class as usize] as usize;
        Some(self.accept[s])
    }
}

pub struct DfaMatcherType;

pub struct DfaMatcher {
    name: String,
    automaton: RwLock<Option<Arc<Automaton>>>,
}

impl ExternType for DfaMatcherType {
    fn name(&self) -> &str {
        "dfa_matcher"
    }
    fn instantiate(&self, name: &str, _args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        Ok(Box::new(DfaMatcher {
            name: name.to_string(),
            automaton: RwLock::new(None),
        }))
    }
}

impl ExternObject for DfaMatcher {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match (sig.name.as_str(), sig.args.as_slice()) {
            ("scan", [(Dir::In, 8), (Dir::In, 32), (Dir::Out, 1)]) => Ok(0),
            _ => Err(format!("dfa_matcher `{}`: the method is scan(in bit<8> mode, in bit<32> offset, out bit<1> matched)", self.name)),
        }
    }

    fn call(
        &self,
        _m: u32,
        args: &mut [BitBuf],
        _ret: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError> {
        let mode = args[0].as_u64() as usize;
        let off = (args[1].as_u64() as usize).min(payload.bytes().len());
        // no automaton loaded yet: nothing matches
        let a = self
            .automaton
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let hit = match a {
            Some(a) => a
                .matches(mode, &payload.bytes()[off..])
                .ok_or_else(|| ExternError::BadArgument(format!("dfa_matcher: no mode {mode}")))?,
            None => false,
        };
        args[2].set_bytes(&[hit as u8]);
        Ok(())
    }

    fn control(&self, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
        match op {
            "load" => {
                let a = Automaton::from_json(args)?;
                let states = a.accept.len();
                *self.automaton.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(a));
                Ok(format!("{{\"states\":{states}}}").into_bytes())
            }
            "clear" => {
                *self.automaton.write().unwrap_or_else(|p| p.into_inner()) = None;
                Ok(vec![])
            }
            _ => Err(format!(
                "dfa_matcher `{}`: no operation `{op}` (load, clear)",
                self.name
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(transitions: &str, accept: &str) -> String {
        let map: Vec<String> = (0..256)
            .map(|b| {
                if b == b'a' as usize {
                    "1".into()
                } else {
                    "0".into()
                }
            })
            .collect();
        format!(
            r#"{{"states":3,"classes":2,"end_class":0,"modes":[[[{}],0]],"transitions":{transitions},"accept":{accept}}}"#,
            map.join(",")
        )
    }

    #[test]
    fn scans_and_reports() {
        // "aa" followed by the end class is accepted
        let a = Automaton::from_json(json("[[0,1,1],[1,1,2],[2,0,2],[2,1,2]]", "[]").as_bytes())
            .unwrap();
        assert_eq!(a.matches(0, b"a"), Some(false));
        let b = Automaton::from_json(json("[[0,1,1],[1,1,2]]", "[2]").as_bytes()).unwrap();
        assert_eq!(b.matches(0, b"xaay"), Some(true));
        assert_eq!(b.matches(0, b"xaxa"), Some(false));
        assert_eq!(b.matches(1, b"aa"), None, "no such mode");
    }

    #[test]
    fn bad_automata_get_precise_errors() {
        for (j, want) in [
            (json("[[0,1,7]]", "[]"), "out of range"),
            (json("[[0,5,1]]", "[]"), "out of range"),
            (json("[]", "[9]"), "accepting state 9"),
            ("{\"states\":0}".to_string(), "bad automaton"),
            (json("[]", "[]").replace("[[[0", "[[[0,0"), "256 entries"),
            ("not json".to_string(), "bad automaton"),
        ] {
            let e = Automaton::from_json(j.as_bytes()).unwrap_err();
            assert!(e.contains(want), "{e} should mention {want}");
        }
    }
}
