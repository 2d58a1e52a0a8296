//! The parser stage: the parser's hot loop over compiled states and one-key selects, the general
//! loop (every kind of transition, traced), select keys matched against cases and value sets.

use crate::bits::{self, Wide};
use crate::code::Flow;
use crate::engine::{parse_end, LeanNext, XF};
use crate::{Engine, Worker};
use p4sec_ir::*;

impl Engine {
    // ------------------------------------------------------------ parser

    /// Run the parser over `w.packet.pkt`; on return the unparsed bytes start at `w.packet.payload_at`.
    #[inline(always)]
    pub(crate) fn run_parser(&self, w: &mut Worker) {
        let start = self.prog.parser.start as usize;
        let err = if w.trace.is_none() {
            match self
                .controls
                .native
                .parser
                .and_then(|s| crate::native::enter(s, self, w))
                .unwrap_or(parse_end::NOT_RUN)
            {
                parse_end::NOT_RUN => self.parse_lean(w, start),
                r => self.native_parse_end(w, r),
            }
        } else {
            self.parse_general(w, start, 0, false)
        };
        self.parser_done(w, err);
    }

    /// The end of the parser when the pass's native code ran it (`r`: the parser's end word,
    /// [`parse_end`]): as [`Engine::run_parser`] after its native parser.
    #[inline(always)]
    pub(crate) fn native_parser_done(&self, w: &mut Worker, r: u64) {
        let err = if r == parse_end::ACCEPT {
            0
        } else {
            std::hint::cold_path();
            self.native_parse_end(w, r)
        };
        self.parser_done(w, err);
    }

    /// The parser's error, if any, into `parser_error`, and where the payload starts.
    #[inline(always)]
    fn parser_done(&self, w: &mut Worker, err: u32) {
        if err != 0 && err != u32::MAX {
            std::hint::cold_path();
            self.parser_error(w, err);
        }
        // the payload stays where it is in `pkt` until something needs it apart
        // (`Worker::own_payload`) from the byte that holds the first unparsed bit, as BMv2 does
        // when the parser stops inside a byte
        w.packet.payload_at = (w.packet.cursor / 8).min(w.packet.pkt.len());
    }

    /// The parser's hot loop: states whose transition is a `Goto` or a select on one narrow key
    /// (`LeanNext`). At any other transition it hands over to [`Engine::parse_general`]. Returns
    /// the error (0: accepted, `u32::MAX`: rejected without an error).
    #[inline(always)]
    fn parse_lean(&self, w: &mut Worker, mut state: usize) -> u32 {
        let mut steps = 0u32;
        loop {
            steps += 1;
            if steps > self.parser.max_steps {
                return self.layout.errors.timeout;
            }
            let Some(block) = self.parser.states.get(state) else {
                return self.layout.errors.no_match;
            };
            match block.run(self, w) {
                Flow::Next | Flow::Break(_) => {}
                Flow::Reject(e) => return e,
                Flow::Exit => return 0,
            }
            let next = match self.parser.lean_next.get(state) {
                Some(LeanNext::Goto(n)) => n,
                Some(LeanNext::SelectOne(k, cases)) => match self.select_one(w, k, cases) {
                    Some(n) => n,
                    None => return self.layout.errors.no_match,
                },
                Some(LeanNext::SelectTwo(k0, k1, cases)) => match self.select_two(w, k0, k1, cases)
                {
                    Some(n) => n,
                    None => return self.layout.errors.no_match,
                },
                _ => {
                    std::hint::cold_path();
                    return self.parse_general(w, state, steps, true);
                }
            };
            match next {
                Next::Accept => return 0,
                Next::Reject => return u32::MAX,
                Next::State(s) => state = *s as usize,
            }
        }
    }

    /// The error a native parser's end word means (as [`Engine::parse_lean`]'s result), after
    /// the general loop took over when it handed over a transition.
    #[inline(always)]
    fn native_parse_end(&self, w: &mut Worker, r: u64) -> u32 {
        match r & 7 {
            parse_end::ERROR => (r >> 3) as u32,
            parse_end::TIMEOUT => self.layout.errors.timeout,
            parse_end::NO_MATCH => self.layout.errors.no_match,
            parse_end::GENERAL => {
                std::hint::cold_path();
                self.parse_general(w, (r >> 3) as u32 as usize, (r >> 35) as u32, true)
            }
            _ => 0,
        }
    }

    /// The case a select on one narrow key takes: the key once, then (mask, value) per case.
    #[inline(always)]
    fn select_one<'a>(
        &self,
        w: &mut Worker,
        k: &XF,
        cases: &'a [(u64, u64, Next)],
    ) -> Option<&'a Next> {
        let v = k(self, w);
        cases
            .iter()
            .find(|(m, x, _)| v & m == *x)
            .map(|(_, _, n)| n)
    }

    /// The case a select on two narrow keys takes: both keys once, then their (mask, value) pairs
    /// per case.
    #[inline(always)]
    fn select_two<'a>(
        &self,
        w: &mut Worker,
        k0: &XF,
        k1: &XF,
        cases: &'a [([u64; 4], Next)],
    ) -> Option<&'a Next> {
        let (a, b) = (k0(self, w), k1(self, w));
        cases
            .iter()
            .find(|([m0, v0, m1, v1], _)| a & m0 == *v0 && b & m1 == *v1)
            .map(|(_, n)| n)
    }

    #[cold]
    #[inline(never)]
    fn parser_error(&self, w: &mut Worker, err: u32) {
        self.store(w, self.prog.std_meta.parser_error, err as u64);
        if let Some(t) = w.trace.as_mut() {
            t.push(format!(
                "parser error {}",
                self.prog
                    .errors
                    .get(err as usize)
                    .map(|s| s.as_str())
                    .unwrap_or("?")
            ));
        }
    }

    /// The parser from `state` (after `steps` steps) with every kind of transition, and traced;
    /// with `ran`, the state's statements have run already and its transition is next.
    #[inline(never)]
    fn parse_general(
        &self,
        w: &mut Worker,
        mut state: usize,
        mut steps: u32,
        mut ran: bool,
    ) -> u32 {
        let p = &self.prog.parser;
        loop {
            let Some(st) = p.states.get(state) else {
                break self.layout.errors.no_match;
            };
            if !std::mem::take(&mut ran) {
                steps += 1;
                if steps > self.parser.max_steps {
                    break self.layout.errors.timeout;
                }
                if let Some(t) = w.trace.as_mut() {
                    t.push(format!("parser state {}", st.name));
                }
                match self.parser.states[state].run(self, w) {
                    Flow::Next | Flow::Break(_) => {}
                    Flow::Reject(e) => break e,
                    Flow::Exit => break 0,
                }
            }
            let next = match &st.transition {
                Transition::Goto(n) => n,
                // one narrow key against exact or masked values: the key once, then (mask, value)
                // pairs
                Transition::Select { .. }
                    if let Some(LeanNext::SelectOne(k, cases)) =
                        self.parser.lean_next.get(state) =>
                {
                    match self.select_one(w, k, cases) {
                        Some(n) => n,
                        None => break self.layout.errors.no_match,
                    }
                }
                Transition::Select { .. }
                    if let Some(LeanNext::SelectTwo(k0, k1, cases)) =
                        self.parser.lean_next.get(state) =>
                {
                    match self.select_two(w, k0, k1, cases) {
                        Some(n) => n,
                        None => break self.layout.errors.no_match,
                    }
                }
                Transition::Select { keys, cases } if self.parser.select_keys[state].is_some() => {
                    // fast path: narrow keys as machine words
                    let mut kv = [0u64; 8];
                    for (i, k) in self.parser.select_keys[state].iter().flatten().enumerate() {
                        kv[i] = k(self, w);
                    }
                    let _ = keys;
                    if w.perr != 0 {
                        let e = w.perr;
                        w.perr = 0;
                        break e;
                    }
                    if let Some(cs) = &self.parser.select_cases[state] {
                        let hit = cs
                            .iter()
                            .find(|(ms, _)| ms.iter().zip(&kv).all(|(&(m, v), k)| k & m == v));
                        match hit {
                            Some((_, n)) => match n {
                                Next::Accept => break 0,
                                Next::Reject => break u32::MAX,
                                Next::State(s) => {
                                    state = *s as usize;
                                    continue;
                                }
                            },
                            None => break self.layout.errors.no_match,
                        }
                    }
                    if w.perr != 0 {
                        let e = w.perr;
                        w.perr = 0;
                        break e;
                    }
                    let mut found = None;
                    'fast: for (ms, n) in cases {
                        for (i, m) in ms.iter().enumerate() {
                            let v = kv[i];
                            let ok = match m {
                                KeyMatch::Any => true,
                                KeyMatch::Exact(a) => a.as_u64() == v,
                                KeyMatch::Mask { value, mask } => {
                                    (v & mask.as_u64()) == (value.as_u64() & mask.as_u64())
                                }
                                KeyMatch::Range { lo, hi } => v >= lo.as_u64() && v <= hi.as_u64(),
                                KeyMatch::ValueSet(id) => {
                                    let mut wk = [bits::ZERO; 8];
                                    for (j, x) in kv[i..].iter().enumerate() {
                                        wk[j] = bits::from_u64(*x);
                                    }
                                    self.value_set_match(*id, &wk[..8 - i])
                                }
                            };
                            if !ok {
                                continue 'fast;
                            }
                        }
                        found = Some(n);
                        break;
                    }
                    match found {
                        Some(n) => n,
                        None => break self.layout.errors.no_match,
                    }
                }
                Transition::Select { keys, cases } => {
                    let mut found = None;
                    let mut kv = [bits::ZERO; 8];
                    for (i, k) in keys.iter().enumerate().take(8) {
                        kv[i] = self.eval_wide(w, k);
                    }
                    if w.perr != 0 {
                        let e = w.perr;
                        w.perr = 0;
                        break e;
                    }
                    'cases: for (ms, n) in cases {
                        for (i, m) in ms.iter().enumerate() {
                            let ok = match m {
                                KeyMatch::ValueSet(id) => {
                                    self.value_set_match(*id, &kv[i.min(7)..])
                                }
                                _ => self.key_match(&kv[i.min(7)], m),
                            };
                            if !ok {
                                continue 'cases;
                            }
                        }
                        found = Some(n);
                        break;
                    }
                    match found {
                        Some(n) => n,
                        None => break self.layout.errors.no_match,
                    }
                }
            };
            match next {
                Next::Accept => break 0,
                Next::Reject => break u32::MAX,
                Next::State(s) => state = *s as usize,
            }
        }
    }

    fn key_match(&self, v: &Wide, m: &KeyMatch) -> bool {
        let eqw = |a: &Value| {
            a.words.iter().enumerate().all(|(i, x)| *x == v[i])
                && v[a.words.len()..].iter().all(|x| *x == 0)
        };
        match m {
            KeyMatch::Any => true,
            KeyMatch::Exact(a) => eqw(a),
            KeyMatch::Mask { value, mask } => mask
                .words
                .iter()
                .enumerate()
                .all(|(i, mw)| (v[i] & mw) == (value.words.get(i).copied().unwrap_or(0) & mw)),
            KeyMatch::Range { lo, hi } => {
                let mut l = bits::ZERO;
                let mut h = bits::ZERO;
                for (i, x) in lo.words.iter().enumerate() {
                    l[i] = *x;
                }
                for (i, x) in hi.words.iter().enumerate() {
                    h[i] = *x;
                }
                bits::cmp(v, &l).is_ge() && bits::cmp(v, &h).is_le()
            }
            KeyMatch::ValueSet(id) => self.value_set_match(*id, std::slice::from_ref(v)),
        }
    }

    /// Is the key tuple `keys` (from the select key the value set stands at) a member of value set
    /// `id`? Each element of a member matches the key at its position.
    fn value_set_match(&self, id: u32, keys: &[Wide]) -> bool {
        let Some(vs) = self.prog.value_sets.get(id as usize) else {
            return false;
        };
        let set = self.parser.value_sets[id as usize].load();
        set.iter().any(|member| {
            member.len() <= keys.len()
                && member.iter().zip(keys).zip(&vs.widths).all(|((m, k), w)| {
                    let words = (p4sec_ir::words_for(*w) as usize).clamp(1, k.len());
                    crate::tables::field_matches(m, &k[..words], *w)
                })
        })
    }
}

#[cfg(test)]
mod tests;
