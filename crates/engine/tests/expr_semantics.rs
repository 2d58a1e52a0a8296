//! Randomized differential test of expression semantics: random well-typed P4_16 expressions over
//! header fields of many widths and both signednesses (arithmetic, saturating arithmetic, bitwise
//! operations, shifts by narrow and wide amounts, slices, concatenation, casts, conditionals, typed
//! and untyped integer literals), compiled by the frontend and run by the engine, are checked
//! against an independent evaluator of the spec's semantics written here (values held as `u128`, so
//! widths up to 128 bits).
//!
//! `P4SEC_EXPR_SEED` and `P4SEC_EXPR_PROGRAMS` choose another seed and more programs for a longer
//! search.

use p4sec_engine::{Engine, Outputs, Worker};
use std::fmt::Write;
use std::sync::Arc;

/// xorshift64*: a small deterministic generator (the test needs no statistical quality).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True with probability `p` percent.
    fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    /// A value of `w` bits, often one of the edge values (0, 1, all ones, the sign bit, the largest
    /// positive).
    fn value(&mut self, w: u32) -> u128 {
        let m = mask(w);
        let v = match self.below(8) {
            0 => 0,
            1 => 1,
            2 => m,
            3 => 1u128 << (w - 1),
            4 => (1u128 << (w - 1)).wrapping_sub(1),
            5 => m - 1,
            _ => (self.next() as u128) << 64 | self.next() as u128,
        };
        v & m
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    Bool,
    Bit(u32),
    Int(u32),
}

impl Ty {
    fn width(self) -> u32 {
        match self {
            Ty::Bool => 1,
            Ty::Bit(w) | Ty::Int(w) => w,
        }
    }
    fn p4(self) -> String {
        match self {
            Ty::Bool => "bool".into(),
            Ty::Bit(w) => format!("bit<{w}>"),
            Ty::Int(w) => format!("int<{w}>"),
        }
    }
}

#[derive(Clone, Debug)]
enum E {
    /// An input field (index into the program's fields).
    Field(usize),
    /// A typed literal: `WwV`, or `WsV` with V below 2^(W-1).
    Lit(Ty, u128),
    /// An untyped integer literal, converted to the other operand's type.
    Int(i128),
    BoolLit(bool),
    Un(&'static str, Box<E>),
    Bin(&'static str, Box<E>, Box<E>),
    Slice(Box<E>, u32, u32),
    Cast(Ty, Box<E>),
    Cond(Box<E>, Box<E>, Box<E>),
}

fn mask(w: u32) -> u128 {
    if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    }
}

fn sext(v: u128, w: u32) -> i128 {
    if w >= 128 {
        v as i128
    } else {
        ((v << (128 - w)) as i128) >> (128 - w)
    }
}

/// P4 source of `e` (fully parenthesized); `f` names the input fields.
fn p4(e: &E, f: &dyn Fn(usize) -> String) -> String {
    match e {
        E::Field(i) => f(*i),
        E::Lit(Ty::Bit(w), v) => format!("{w}w{v}"),
        E::Lit(Ty::Int(w), v) => format!("{w}s{v}"),
        E::Lit(Ty::Bool, v) => format!("{}", *v != 0),
        E::Int(k) if *k < 0 => format!("(-{})", k.unsigned_abs()),
        E::Int(k) => format!("{k}"),
        E::BoolLit(b) => format!("{b}"),
        E::Un(op, a) => format!("({op}{})", p4(a, f)),
        E::Bin(op, a, b) => format!("({} {op} {})", p4(a, f), p4(b, f)),
        E::Slice(a, hi, lo) => format!("({})[{hi}:{lo}]", p4(a, f)),
        E::Cast(t, a) => format!("(({}) {})", t.p4(), p4(a, f)),
        E::Cond(c, a, b) => format!("({} ? {} : {})", p4(c, f), p4(a, f), p4(b, f)),
    }
}

/// The type of `e` (`None` for an untyped integer literal).
fn ty_of(e: &E, fields: &[Ty]) -> Option<Ty> {
    Some(match e {
        E::Field(i) => fields[*i],
        E::Lit(t, _) => *t,
        E::Int(_) => return None,
        E::BoolLit(_) => Ty::Bool,
        E::Un(op, a) => {
            if *op == "!" {
                Ty::Bool
            } else {
                ty_of(a, fields)?
            }
        }
        E::Bin(op, a, b) => match *op {
            "==" | "!=" | "<" | "<=" | ">" | ">=" | "&&" | "||" => Ty::Bool,
            "<<" | ">>" => ty_of(a, fields)?,
            "++" => {
                let (ta, tb) = (ty_of(a, fields)?, ty_of(b, fields)?);
                match ta {
                    Ty::Int(_) => Ty::Int(ta.width() + tb.width()),
                    _ => Ty::Bit(ta.width() + tb.width()),
                }
            }
            _ => ty_of(a, fields).or_else(|| ty_of(b, fields))?,
        },
        E::Slice(_, hi, lo) => Ty::Bit(hi - lo + 1),
        E::Cast(t, _) => *t,
        E::Cond(_, a, b) => ty_of(a, fields).or_else(|| ty_of(b, fields))?,
    })
}

/// The reference semantics (P4_16 spec, section 8): the value of `e` (masked to its width) and its
/// type.
fn eval(e: &E, fields: &[Ty], inputs: &[u128]) -> (u128, Ty) {
    // an operand that may be an untyped literal, converted to type `t` (modulo 2^W)
    let operand = |x: &E, t: Ty| -> u128 {
        match x {
            E::Int(k) => (*k as u128) & mask(t.width()),
            _ => eval(x, fields, inputs).0,
        }
    };
    match e {
        E::Field(i) => (inputs[*i], fields[*i]),
        E::Lit(t, v) => (*v, *t),
        E::Int(_) => unreachable!("untyped literals are converted by the operation using them"),
        E::BoolLit(b) => (*b as u128, Ty::Bool),
        E::Un(op, a) => {
            let (v, t) = eval(a, fields, inputs);
            let m = mask(t.width());
            match *op {
                "-" => (v.wrapping_neg() & m, t),
                "~" => (!v & m, t),
                "!" => (v ^ 1, Ty::Bool),
                _ => unreachable!(),
            }
        }
        E::Bin(op, a, b) => {
            match *op {
                "&&" => {
                    return (
                        (eval(a, fields, inputs).0 & eval(b, fields, inputs).0),
                        Ty::Bool,
                    )
                }
                "||" => {
                    return (
                        (eval(a, fields, inputs).0 | eval(b, fields, inputs).0),
                        Ty::Bool,
                    )
                }
                "<<" | ">>" => {
                    let (x, t) = eval(a, fields, inputs);
                    let n = match &**b {
                        E::Int(k) => *k as u128,
                        _ => eval(b, fields, inputs).0,
                    };
                    let w = t.width();
                    let r = if *op == "<<" {
                        if n >= w as u128 {
                            0
                        } else {
                            x << n
                        }
                    } else if matches!(t, Ty::Int(_)) {
                        (sext(x, w) >> n.min(127)) as u128
                    } else if n >= w as u128 {
                        0
                    } else {
                        x >> n
                    };
                    return (r & mask(w), t);
                }
                "++" => {
                    let (x, ta) = eval(a, fields, inputs);
                    let (y, tb) = eval(b, fields, inputs);
                    let w = ta.width() + tb.width();
                    let t = if matches!(ta, Ty::Int(_)) {
                        Ty::Int(w)
                    } else {
                        Ty::Bit(w)
                    };
                    return (((x << tb.width()) | y) & mask(w), t);
                }
                _ => {}
            }
            let t = ty_of(a, fields)
                .or_else(|| ty_of(b, fields))
                .expect("an operation on two untyped literals");
            let (x, y) = (operand(a, t), operand(b, t));
            let (w, m, signed) = (t.width(), mask(t.width()), matches!(t, Ty::Int(_)));
            let (sx, sy) = (sext(x, w), sext(y, w));
            let cmp = |r: bool| (r as u128, Ty::Bool);
            match *op {
                "+" => (x.wrapping_add(y) & m, t),
                "-" => (x.wrapping_sub(y) & m, t),
                "*" => (x.wrapping_mul(y) & m, t),
                "/" => (x / y, t),
                "%" => (x % y, t),
                "&" => (x & y, t),
                "|" => (x | y, t),
                "^" => (x ^ y, t),
                "|+|" | "|-|" => {
                    let r = if signed {
                        let s = if *op == "|+|" {
                            sx.saturating_add(sy)
                        } else {
                            sx.saturating_sub(sy)
                        };
                        let (min, max) = if w == 128 {
                            (i128::MIN, i128::MAX)
                        } else {
                            (-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1)
                        };
                        (s.clamp(min, max) as u128) & m
                    } else if *op == "|+|" {
                        x.checked_add(y).map_or(m, |s| s.min(m))
                    } else {
                        x.saturating_sub(y)
                    };
                    (r, t)
                }
                "==" => cmp(x == y),
                "!=" => cmp(x != y),
                "<" => cmp(if signed { sx < sy } else { x < y }),
                "<=" => cmp(if signed { sx <= sy } else { x <= y }),
                ">" => cmp(if signed { sx > sy } else { x > y }),
                ">=" => cmp(if signed { sx >= sy } else { x >= y }),
                _ => unreachable!("{op}"),
            }
        }
        E::Slice(a, hi, lo) => {
            let (v, _) = eval(a, fields, inputs);
            ((v >> lo) & mask(hi - lo + 1), Ty::Bit(hi - lo + 1))
        }
        E::Cast(t, a) => {
            let (v, from) = eval(a, fields, inputs);
            let r = match (from, *t) {
                (Ty::Int(w1), Ty::Int(w)) => (sext(v, w1) as u128) & mask(w),
                _ => v & mask(t.width()),
            };
            (r, *t)
        }
        E::Cond(c, a, b) => {
            let t = ty_of(a, fields)
                .or_else(|| ty_of(b, fields))
                .expect("typed branch");
            if eval(c, fields, inputs).0 != 0 {
                (operand(a, t), t)
            } else {
                (operand(b, t), t)
            }
        }
    }
}

/// Random well-typed expressions over a program's input fields.
struct Gen<'a> {
    rng: &'a mut Rng,
    fields: &'a [Ty],
}

impl Gen<'_> {
    fn field_of(&mut self, t: Ty) -> Option<usize> {
        let c: Vec<usize> = (0..self.fields.len())
            .filter(|&i| self.fields[i] == t)
            .collect();
        (!c.is_empty()).then(|| self.rng.pick(&c))
    }

    /// An untyped literal for an operand of type `t`: small values, -1, and values just outside the
    /// range.
    fn int_lit(&mut self, t: Ty) -> E {
        let w = t.width().min(120);
        E::Int(match self.rng.below(7) {
            0 => -1,
            1 => 0,
            2 => 1,
            3 => (1i128 << w) - 1,
            4 => 1i128 << w,
            5 => -(1i128 << (w - 1)),
            _ => self.rng.below(1000) as i128 - 500,
        })
    }

    fn lit(&mut self, t: Ty) -> E {
        match t {
            Ty::Bool => E::BoolLit(self.rng.chance(50)),
            Ty::Bit(w) => E::Lit(t, self.rng.value(w)),
            Ty::Int(w) => E::Lit(t, if w == 1 { 0 } else { self.rng.value(w - 1) }),
        }
    }

    fn scalar_type(&mut self) -> Ty {
        if self.rng.chance(70) {
            self.fields[self.rng.below(self.fields.len() as u64) as usize]
        } else {
            let w = self
                .rng
                .pick(&[1, 2, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 100, 127, 128]);
            if self.rng.chance(50) {
                Ty::Bit(w)
            } else {
                Ty::Int(w)
            }
        }
    }

    fn leaf(&mut self, t: Ty) -> E {
        if t == Ty::Bool {
            let ft = self.scalar_type();
            let a = self.leaf(ft);
            let b = if self.rng.chance(50) {
                self.int_lit(ft)
            } else {
                self.lit(ft)
            };
            let op = self.rng.pick(&["==", "!=", "<", "<=", ">", ">="]);
            return E::Bin(op, Box::new(a), Box::new(b));
        }
        if self.rng.chance(65) {
            if let Some(i) = self.field_of(t) {
                return E::Field(i);
            }
            // a field of another width or signedness, cast
            let i = self.rng.below(self.fields.len() as u64) as usize;
            let f = self.fields[i];
            if let Some(e) = self.cast_to(t, E::Field(i), f) {
                return e;
            }
        }
        self.lit(t)
    }

    /// `e` (of type `from`) as type `to` through casts the spec allows (one or two).
    fn cast_to(&mut self, to: Ty, e: E, from: Ty) -> Option<E> {
        let c = |t: Ty, e: E| E::Cast(t, Box::new(e));
        Some(match (from, to) {
            (a, b) if a == b => e,
            (Ty::Bit(_), Ty::Bit(_)) | (Ty::Int(_), Ty::Int(_)) => c(to, e),
            (Ty::Bit(w1), Ty::Int(w)) | (Ty::Int(w1), Ty::Bit(w)) if w1 == w => c(to, e),
            (Ty::Bit(w1), Ty::Int(_)) => c(to, c(Ty::Int(w1), e)),
            (Ty::Int(w1), Ty::Bit(_)) => c(to, c(Ty::Bit(w1), e)),
            (Ty::Bool, Ty::Bit(1)) => c(to, e),
            _ => return None,
        })
    }

    fn expr(&mut self, t: Ty, depth: u32) -> E {
        if depth == 0 || self.rng.chance(20) {
            return self.leaf(t);
        }
        let d = depth - 1;
        let b = Box::new;
        if t == Ty::Bool {
            return match self.rng.below(6) {
                0 => E::Un("!", b(self.expr(Ty::Bool, d))),
                1 => E::Bin(
                    self.rng.pick(&["&&", "||"]),
                    b(self.expr(Ty::Bool, d)),
                    b(self.expr(Ty::Bool, d)),
                ),
                _ => {
                    let ot = self.scalar_type();
                    let x = self.expr(ot, d);
                    let y = if self.rng.chance(25) {
                        self.int_lit(ot)
                    } else {
                        self.expr(ot, d)
                    };
                    let (x, y) = if self.rng.chance(20) { (y, x) } else { (x, y) };
                    E::Bin(
                        self.rng.pick(&["==", "!=", "<", "<=", ">", ">="]),
                        b(x),
                        b(y),
                    )
                }
            };
        }
        let (w, signed) = (t.width(), matches!(t, Ty::Int(_)));
        match self.rng.below(16) {
            0..=4 => {
                let op = self.rng.pick(&["+", "-", "*", "&", "|", "^", "|+|", "|-|"]);
                let x = self.expr(t, d);
                let y = if self.rng.chance(25) {
                    self.int_lit(t)
                } else {
                    self.expr(t, d)
                };
                let (x, y) = if self.rng.chance(15) { (y, x) } else { (x, y) };
                E::Bin(op, b(x), b(y))
            }
            5 if !signed => {
                let op = self.rng.pick(&["/", "%"]);
                let mut v = self.rng.value(w);
                if v == 0 {
                    v = 1;
                }
                E::Bin(op, b(self.expr(t, d)), b(E::Lit(t, v)))
            }
            5..=7 => {
                let op = self.rng.pick(&["<<", ">>"]);
                let x = self.expr(t, d);
                let n = if self.rng.chance(40) {
                    E::Int(self.rng.below(w as u64 + 3) as i128)
                } else {
                    let k = self.rng.pick(&[1, 3, 4, 7, 8, 16, 64, 65, 128]);
                    self.expr(Ty::Bit(k), d)
                };
                E::Bin(op, b(x), b(n))
            }
            8 => E::Un(self.rng.pick(&["-", "~"]), b(self.expr(t, d))),
            9 | 10 => {
                // a slice of a wider (or as wide) value
                let w2 = (w + self.rng.below(130 - w as u64) as u32).min(128);
                let st = if self.rng.chance(50) {
                    Ty::Bit(w2)
                } else {
                    Ty::Int(w2)
                };
                let lo = self.rng.below((w2 - w + 1) as u64) as u32;
                let s = E::Slice(b(self.expr(st, d)), lo + w - 1, lo);
                if signed {
                    E::Cast(t, b(s))
                } else {
                    s
                }
            }
            11 if w >= 2 => {
                let w1 = 1 + self.rng.below(w as u64 - 1) as u32;
                let lt = if signed { Ty::Int(w1) } else { Ty::Bit(w1) };
                let rt = if self.rng.chance(50) {
                    Ty::Bit(w - w1)
                } else {
                    Ty::Int(w - w1)
                };
                E::Bin("++", b(self.expr(lt, d)), b(self.expr(rt, d)))
            }
            12 | 13 => {
                let from = self.scalar_type();
                let from = if w == 1 && !signed && self.rng.chance(20) {
                    Ty::Bool
                } else {
                    from
                };
                let x = self.expr(from, d);
                self.cast_to(t, x, from).unwrap_or_else(|| self.leaf(t))
            }
            _ => E::Cond(
                b(self.expr(Ty::Bool, d)),
                b(self.expr(t, d)),
                b(self.expr(t, d)),
            ),
        }
    }
}

/// Bits written most significant first.
fn put_bits(out: &mut Vec<bool>, v: u128, w: u32) {
    for i in (0..w).rev() {
        out.push((v >> i) & 1 == 1);
    }
}

fn get_bits(bytes: &[u8], pos: usize, w: u32) -> u128 {
    (0..w as usize).fold(0u128, |acc, i| {
        (acc << 1) | ((bytes[(pos + i) / 8] >> (7 - (pos + i) % 8)) & 1) as u128
    })
}

fn to_bytes(bits: &[bool]) -> Vec<u8> {
    bits.chunks(8)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u8, |acc, (i, b)| acc | ((*b as u8) << (7 - i)))
        })
        .collect()
}

fn pad(total: u32) -> u32 {
    (8 - total % 8) % 8
}

/// A program computing `exprs` over input fields `fields` into an output header, compiled and
/// loaded.
struct Program {
    fields: Vec<Ty>,
    exprs: Vec<(E, Ty)>,
    /// The statements writing each output.
    stmts: Vec<String>,
    src: String,
    engine: Engine,
}

/// How a program writes an output `r` of value `e`.
#[derive(Clone, Debug)]
enum Form {
    /// `r = e;` (a bool through `e ? 1w1 : 1w0`).
    Assign,
    /// A bool through `if (e) { r = 1w1; } else { r = 1w0; }`.
    If,
    /// `r = a; r op= b;` for `e` = `a op b`.
    Compound,
    /// `r = a; r[hi:lo] = b;` (`e` is the value that leaves), or with `outer` = (H, L) the nested
    /// slice `r[H:L][hi-L:lo-L] = b;`.
    SliceSet {
        a: E,
        b: E,
        hi: u32,
        lo: u32,
        outer: Option<(u32, u32)>,
    },
}

/// The statements of `form` writing `r` (of type `t`) with value `e`.
fn statements(r: &str, e: &E, t: Ty, form: &Form) -> String {
    let x = || p4(e, &field_name);
    match form {
        Form::Assign if t == Ty::Bool => format!("{r} = {} ? 1w1 : 1w0;", x()),
        Form::Assign => format!("{r} = {};", x()),
        Form::If => format!("if ({}) {{ {r} = 1w1; }} else {{ {r} = 1w0; }}", x()),
        Form::Compound => {
            let E::Bin(op, a, b) = e else {
                unreachable!("a compound assignment of an operation")
            };
            format!(
                "{r} = {}; {r} {op}= {};",
                p4(a, &field_name),
                p4(b, &field_name)
            )
        }
        Form::SliceSet {
            a,
            b,
            hi,
            lo,
            outer: None,
        } => format!(
            "{r} = {}; {r}[{hi}:{lo}] = {};",
            p4(a, &field_name),
            p4(b, &field_name)
        ),
        Form::SliceSet {
            a,
            b,
            hi,
            lo,
            outer: Some((oh, ol)),
        } => {
            format!(
                "{r} = {}; {r}[{oh}:{ol}][{}:{}] = {};",
                p4(a, &field_name),
                hi - ol,
                lo - ol,
                p4(b, &field_name)
            )
        }
    }
}

/// The value of `r = a; r[hi:lo] = b;` for `a` of type `t`, as an expression: the bits of `a` above
/// and below the slice around `b`.
fn slice_set_value(a: &E, b: &E, t: Ty, hi: u32, lo: u32) -> E {
    let w = t.width();
    let mut v = b.clone();
    if hi + 1 < w {
        v = E::Bin(
            "++",
            Box::new(E::Slice(Box::new(a.clone()), w - 1, hi + 1)),
            Box::new(v),
        );
    }
    if lo > 0 {
        v = E::Bin(
            "++",
            Box::new(v),
            Box::new(E::Slice(Box::new(a.clone()), lo - 1, 0)),
        );
    }
    match t {
        Ty::Int(_) => E::Cast(t, Box::new(v)),
        _ => v,
    }
}

impl Program {
    fn new(fields: &[Ty], outs: Vec<(E, Ty, Form)>) -> Result<Program, String> {
        let exprs: Vec<(E, Ty)> = outs.iter().map(|(e, t, _)| (e.clone(), *t)).collect();
        let mut src = String::from("#include <v1model.p4>\nheader in_t {\n");
        for (i, t) in fields.iter().enumerate() {
            writeln!(src, "    {} f{i};", t.p4()).unwrap();
        }
        writeln!(
            src,
            "    bit<{}> pad;\n}}\nheader out_t {{",
            pad(bits_of(fields)) + 8
        )
        .unwrap();
        for (i, (_, t)) in exprs.iter().enumerate() {
            let t = if *t == Ty::Bool { Ty::Bit(1) } else { *t };
            writeln!(src, "    {} r{i};", t.p4()).unwrap();
        }
        let out_bits: u32 = exprs.iter().map(|(_, t)| t.width()).sum();
        writeln!(src, "    bit<{}> pad;\n}}", pad(out_bits) + 8).unwrap();
        src.push_str(
            "struct hs { in_t i; out_t o; }\nstruct m { }\n\
             parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {\n    state start { p.extract(hdr.i); p.extract(hdr.o); transition accept; }\n}\n\
             control V(inout hs hdr, inout m meta) { apply { } }\n\
             control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {\n    apply {\n        sm.egress_spec = 1;\n",
        );
        let stmts: Vec<String> = outs
            .iter()
            .enumerate()
            .map(|(i, (e, t, form))| statements(&format!("hdr.o.r{i}"), e, *t, form))
            .collect();
        for st in &stmts {
            writeln!(src, "        {st}").unwrap();
        }
        src.push_str(
            "    }\n}\ncontrol E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }\n\
             control D(packet_out p, in hs hdr) { apply { p.emit(hdr.i); p.emit(hdr.o); } }\n\
             V1Switch(P(), V(), I(), E(), V(), D()) main;\n",
        );
        let prog = p4sec_frontend::compile_str("expr.p4", &src, &Default::default())
            .map_err(|e| format!("does not compile: {e}\n{src}"))?;
        let engine = Engine::new(Arc::new(prog), &p4sec_engine::test_externs::registry())
            .map_err(|e| format!("no engine: {e}"))?;
        Ok(Program {
            fields: fields.to_vec(),
            exprs,
            stmts,
            src,
            engine,
        })
    }

    /// (expected, computed) per expression for one packet carrying `inputs`.
    fn run(&self, inputs: &[u128]) -> Result<Vec<(u128, u128)>, String> {
        let in_bits = bits_of(&self.fields);
        let out_bits: u32 = self.exprs.iter().map(|(_, t)| t.width()).sum();
        let in_len = (in_bits + pad(in_bits) + 8) as usize / 8;
        let out_len = (out_bits + pad(out_bits) + 8) as usize / 8;
        let mut bits = vec![];
        for (v, t) in inputs.iter().zip(&self.fields) {
            put_bits(&mut bits, *v, t.width());
        }
        put_bits(&mut bits, 0, pad(in_bits) + 8);
        let mut pkt = to_bytes(&bits);
        pkt.extend((0..out_len).map(|i| (i * 37) as u8));
        let mut worker = Worker::new(&self.engine);
        let mut out = Outputs::default();
        self.engine.process(&mut worker, 0, &pkt, &mut out);
        let Some((_, got)) = out.iter().next() else {
            return Err(format!("no output\n{}", self.src));
        };
        if got.len() != in_len + out_len {
            return Err(format!(
                "output of {} bytes, {} expected",
                got.len(),
                in_len + out_len
            ));
        }
        let mut pos = in_len * 8;
        let mut r = vec![];
        for (e, t) in &self.exprs {
            let (want, _) = eval(e, &self.fields, inputs);
            r.push((want, get_bits(got, pos, t.width())));
            pos += t.width() as usize;
        }
        Ok(r)
    }
}

fn field_name(i: usize) -> String {
    format!("hdr.i.f{i}")
}

fn bits_of(fields: &[Ty]) -> u32 {
    fields.iter().map(|t| t.width()).sum()
}

/// Every typed subexpression of `e` (itself included), smallest first.
fn subterms(e: &E, fields: &[Ty], out: &mut Vec<(E, Ty)>) {
    match e {
        E::Un(_, a) | E::Slice(a, _, _) | E::Cast(_, a) => subterms(a, fields, out),
        E::Bin(_, a, b) => {
            subterms(a, fields, out);
            subterms(b, fields, out);
        }
        E::Cond(c, a, b) => {
            subterms(c, fields, out);
            subterms(a, fields, out);
            subterms(b, fields, out);
        }
        _ => {}
    }
    if let Some(t) = ty_of(e, fields) {
        out.push((e.clone(), t));
    }
}

/// The smallest subexpression of a failing expression that fails by itself, for the report.
fn smallest_failing(fields: &[Ty], e: &E, inputs: &[u128]) -> String {
    let mut subs = vec![];
    subterms(e, fields, &mut subs);
    let Ok(p) = Program::new(
        fields,
        subs.into_iter()
            .map(|(e, t)| (e, t, Form::Assign))
            .collect(),
    ) else {
        return String::new();
    };
    let Ok(r) = p.run(inputs) else {
        return String::new();
    };
    match p
        .exprs
        .iter()
        .zip(&r)
        .find(|(_, (want, have))| want != have)
    {
        Some(((s, t), (want, have))) => format!(
            "\n  smallest failing part: {} of type {}: expected {want:#x}, computed {have:#x}",
            p4(s, &field_name),
            t.p4()
        ),
        None => String::new(),
    }
}

/// One program: `n` random expressions over random input fields, run over `packets` random packets.
fn check_program(rng: &mut Rng, n: usize, packets: usize) -> Result<(), String> {
    let mut fields: Vec<Ty> = vec![];
    for _ in 0..3 + rng.below(4) {
        let w = rng.pick(&[
            1, 2, 3, 5, 8, 12, 16, 24, 31, 32, 33, 48, 63, 64, 65, 80, 96, 127, 128,
        ]);
        let t = if rng.chance(50) {
            Ty::Bit(w)
        } else {
            Ty::Int(w)
        };
        fields.push(t);
        fields.push(t);
    }
    // shift amounts
    fields.push(Ty::Bit(3));
    fields.push(Ty::Bit(8));
    let mut exprs = vec![];
    for _ in 0..n {
        let t = if rng.chance(25) {
            Ty::Bool
        } else {
            let mut g = Gen {
                rng,
                fields: &fields,
            };
            g.scalar_type()
        };
        let depth = 1 + rng.below(4) as u32;
        let mut g = Gen {
            rng,
            fields: &fields,
        };
        let mut e = g.expr(t, depth);
        let w = t.width();
        let form = match g.rng.below(10) {
            0..=3 if t == Ty::Bool => Form::If,
            0 | 1 if matches!(&e, E::Bin(op, a, _) if !matches!(*op, "==" | "!=" | "<" | "<=" | ">" | ">=" | "&&" | "||" | "++") && ty_of(a, &fields).is_some()) => {
                Form::Compound
            }
            2 | 3 if t != Ty::Bool => {
                let hi = g.rng.below(w as u64) as u32;
                let lo = g.rng.below(hi as u64 + 1) as u32;
                let a = g.expr(t, depth - 1);
                let b = g.expr(Ty::Bit(hi - lo + 1), depth - 1);
                let outer = g.rng.chance(50).then(|| {
                    (
                        hi + g.rng.below((w - hi) as u64) as u32,
                        lo - g.rng.below(lo as u64 + 1) as u32,
                    )
                });
                e = slice_set_value(&a, &b, t, hi, lo);
                Form::SliceSet {
                    a,
                    b,
                    hi,
                    lo,
                    outer,
                }
            }
            _ => Form::Assign,
        };
        assert_eq!(ty_of(&e, &fields), Some(t), "generator typing: {e:?}");
        exprs.push((e, t, form));
    }
    let p = Program::new(&fields, exprs)?;
    for _ in 0..packets {
        let inputs: Vec<u128> = fields.iter().map(|t| rng.value(t.width())).collect();
        for (i, (want, have)) in p.run(&inputs)?.into_iter().enumerate() {
            if want != have {
                let (e, t) = &p.exprs[i];
                let mut msg = format!(
                    "output r{i}: {}\n  value {}\n  of type {}\n  expected {want:#x}, the engine computed {have:#x}\n  inputs:",
                    p.stmts[i],
                    p4(e, &field_name),
                    t.p4()
                );
                for (k, (v, ft)) in inputs.iter().zip(&fields).enumerate() {
                    write!(msg, " f{k}: {} = {v:#x};", ft.p4()).unwrap();
                }
                msg.push_str(&smallest_failing(&fields, e, &inputs));
                return Err(msg);
            }
        }
    }
    Ok(())
}

#[test]
fn random_expressions_match_the_reference_semantics() {
    let seed = std::env::var("P4SEC_EXPR_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234_u64);
    let programs = std::env::var("P4SEC_EXPR_PROGRAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut failures = vec![];
    for k in 0..programs {
        if let Err(e) = check_program(&mut rng, 24, 8) {
            failures.push(format!("program {k} (seed {seed}): {e}"));
            if failures.len() >= 8 {
                break;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} programs disagree with the reference:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The evaluator itself on hand-computed cases, so that a bug in it cannot hide one in the engine.
#[test]
fn reference_evaluator_known_values() {
    let fields = [Ty::Bit(8), Ty::Int(8)];
    let inputs = [0xf0u128, 0x80u128]; // f0 = 240, f1 = -128
    let f = |i| Box::new(E::Field(i));
    let lit = |t, v| Box::new(E::Lit(t, v));
    let cases: Vec<(E, u128)> = vec![
        (E::Bin("==", lit(Ty::Bit(8), 255), Box::new(E::Int(-1))), 1),
        (E::Bin("+", f(0), Box::new(E::Int(-1))), 0xef),
        (E::Bin(">>", f(1), Box::new(E::Int(3))), 0xf0),
        (E::Bin(">>", f(1), Box::new(E::Int(200))), 0xff),
        (E::Bin("<<", f(0), Box::new(E::Int(8))), 0),
        (E::Bin("|+|", f(0), lit(Ty::Bit(8), 0x20)), 0xff),
        (E::Bin("|-|", f(1), lit(Ty::Int(8), 1)), 0x80),
        (E::Bin("<", f(1), lit(Ty::Int(8), 0)), 1),
        (E::Cast(Ty::Int(16), f(1)), 0xff80),
        (E::Cast(Ty::Bit(16), f(0)), 0xf0),
        (E::Bin("++", f(1), f(0)), 0x80f0),
        (E::Slice(f(0), 6, 3), 0xe),
        (E::Un("-", f(0)), 0x10),
    ];
    for (e, want) in cases {
        assert_eq!(
            eval(&e, &fields, &inputs).0,
            want,
            "{}",
            p4(&e, &|i| format!("f{i}"))
        );
    }
}
