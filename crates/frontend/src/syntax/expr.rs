//! Parsing expressions: precedence climbing, casts, postfix forms and primaries.

use super::*;

/// The deepest expression the front end accepts (an operand of an operand of ... `MAX_EXPR_DEPTH`
/// levels, e.g. a chain of that many `+` or `&&` terms): far above written programs (a few dozen
/// levels), and low enough that every later pass, all of which recurse over expressions, and the
/// switch's loader run on an ordinary thread's stack. Deeper expressions get a located error
/// instead of exhausting the stack.
pub const MAX_EXPR_DEPTH: u32 = 256;

fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::new(
        span,
        format!(
            "expression nested more than {MAX_EXPR_DEPTH} levels deep (e.g. a chain of more than {MAX_EXPR_DEPTH} operators): split it with local variables"
        ),
    )
}

/// Refuse `e` if it nests deeper than [`MAX_EXPR_DEPTH`] (located at the first node past the
/// limit); measured with an explicit stack, so the check itself does not recurse.
fn check_depth(e: &Expr) -> PResult<()> {
    let mut stack = vec![(e, 1u32)];
    while let Some((e, d)) = stack.pop() {
        if d > MAX_EXPR_DEPTH {
            return Err(too_deep(e.span));
        }
        let d = d + 1;
        match &e.kind {
            ExprKind::Member(a, _) | ExprKind::Unary(_, a) | ExprKind::Cast(_, a) => {
                stack.push((a, d))
            }
            ExprKind::Index(a, b)
            | ExprKind::Binary(_, a, b)
            | ExprKind::Mask(a, b)
            | ExprKind::Range(a, b) => {
                stack.extend([(&**a, d), (&**b, d)]);
            }
            ExprKind::Slice(a, b, c) | ExprKind::Ternary(a, b, c) => {
                stack.extend([(&**a, d), (&**b, d), (&**c, d)])
            }
            ExprKind::Call { callee, args, .. } => {
                stack.push((callee, d));
                stack.extend(args.iter().map(|x| (&x.value, d)));
            }
            ExprKind::Construct { args, .. } => stack.extend(args.iter().map(|x| (&x.value, d))),
            ExprKind::List(v) => stack.extend(v.iter().map(|x| (x, d))),
            ExprKind::StructInit { fields, .. } | ExprKind::TypedInit { fields, .. } => {
                stack.extend(fields.iter().map(|(_, x)| (x, d)))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Operators whose long chains may be regrouped without changing the value: `+` and `-` together
/// (modular arithmetic), and each of `*`, `&`, `|`, `^`, `++`, `&&`, `||` alone. `None`: not
/// regrouped (a chain of it deepens the tree by one per operator).
fn group(op: BinOp) -> Option<u8> {
    Some(match op {
        BinOp::Add | BinOp::Sub => 0,
        BinOp::Mul => 1,
        BinOp::BitAnd => 2,
        BinOp::BitOr => 3,
        BinOp::BitXor => 4,
        BinOp::Concat => 5,
        BinOp::And => 6,
        BinOp::Or => 7,
        _ => return None,
    })
}

/// Chains up to this many operators keep the left-nested tree the grammar gives; longer ones of a
/// regroupable operator become balanced trees (depth about log2 of the length), so a generated
/// `a + b + ...` of thousands of terms compiles.
const REBALANCE_OVER: usize = 64;

/// One run of operators of one group at one precedence level: `terms[0] ops[0] terms[1] ...`.
struct Run {
    terms: Vec<Expr>,
    ops: Vec<BinOp>,
}

fn node(op: BinOp, a: Expr, b: Expr) -> Expr {
    let span = a.span.to(b.span);
    Expr {
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        span,
    }
}

impl Run {
    fn build(self) -> Expr {
        let Run { terms, ops } = self;
        if ops.len() <= REBALANCE_OVER || ops.first().and_then(|o| group(*o)).is_none() {
            let mut it = terms.into_iter();
            let first = it.next().expect("a run has a first term");
            return ops
                .into_iter()
                .zip(it)
                .fold(first, |a, (op, b)| node(op, a, b));
        }
        let mut terms: Vec<Option<Expr>> = terms.into_iter().map(Some).collect();
        balanced(&mut terms, &ops, false)
    }
}

/// `terms[0] ops[0] terms[1] ... ops[n-2] terms[n-1]` as a balanced tree, the terms kept in order
/// (so they are still evaluated left to right). `flip`: the segment's written `+`/`-` are swapped
/// (it is the right operand of a `-`: `a - (b + c)` for `a - b - c`).
fn balanced(terms: &mut [Option<Expr>], ops: &[BinOp], flip: bool) -> Expr {
    if terms.len() == 1 {
        return terms[0].take().expect("each term is used once");
    }
    let k = terms.len() / 2;
    let join = ops[k - 1];
    let (l, r) = terms.split_at_mut(k);
    let lhs = balanced(l, &ops[..k - 1], flip);
    let op = match (join, flip) {
        (BinOp::Add, true) => BinOp::Sub,
        (BinOp::Sub, true) => BinOp::Add,
        (o, _) => o,
    };
    // `x - (y ...)`: the right part's own signs are swapped relative to the written ones exactly
    // when the written operator joining it is `-` (whatever `flip` was)
    let rhs = balanced(r, &ops[k..], join == BinOp::Sub);
    node(op, lhs, rhs)
}

impl Parser {
    pub fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.ternary();
        self.leave();
        let e = r?;
        check_depth(&e)?;
        Ok(e)
    }

    pub(super) fn ternary(&mut self) -> PResult<Expr> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":", "in the conditional expression")?;
            let b = self.expr()?;
            let sp = c.span.to(b.span);
            return Ok(Expr {
                kind: ExprKind::Ternary(Box::new(c), Box::new(a), Box::new(b)),
                span: sp,
            });
        }
        Ok(c)
    }

    pub(super) fn binop(&self) -> Option<(BinOp, u8)> {
        let Tok::Punct(p) = self.peek() else {
            return None;
        };
        if matches!(*p, "+" | "-") && matches!(self.peek_at(1), Tok::Punct(":")) {
            // `e[lo +: w]` / `e[hi -: w]`: the slice operator, not an addition
            return None;
        }
        Some(match *p {
            "||" => (BinOp::Or, 1),
            "&&" => (BinOp::And, 2),
            "==" => (BinOp::Eq, 3),
            "!=" => (BinOp::Ne, 3),
            "<" => (BinOp::Lt, 4),
            ">" => (BinOp::Gt, 4),
            "<=" => (BinOp::Le, 4),
            ">=" => (BinOp::Ge, 4),
            "|" => (BinOp::BitOr, 5),
            "^" => (BinOp::BitXor, 6),
            "&" => (BinOp::BitAnd, 7),
            "<<" => (BinOp::Shl, 8),
            ">>" => (BinOp::Shr, 8),
            "++" => (BinOp::Concat, 9),
            "+" => (BinOp::Add, 10),
            "-" => (BinOp::Sub, 10),
            "|+|" => (BinOp::AddSat, 10),
            "|-|" => (BinOp::SubSat, 10),
            "*" => (BinOp::Mul, 11),
            "/" => (BinOp::Div, 11),
            "%" => (BinOp::Mod, 11),
            _ => return None,
        })
    }

    pub(super) fn binary(&mut self, min: u8) -> PResult<Expr> {
        let lhs = self.unary()?;
        // the operators at this level come left to right in runs of one group (`+`/`-`, or one
        // associative operator); a run is built once it ends, without recursing per operator
        let mut run = Run {
            terms: vec![lhs],
            ops: vec![],
        };
        // operators of runs that cannot be rebalanced, which deepen the tree by one each: stopped
        // at the limit before the tree grows (an over-deep tree could not even be dropped without
        // exhausting the stack)
        let mut deep = 0u32;
        while let Some((op, prec)) = self.binop() {
            if prec <= min {
                break;
            }
            if run.ops.last().is_some_and(|last| group(*last) != group(op)) {
                run = Run {
                    terms: vec![run.build()],
                    ops: vec![],
                };
            }
            if group(op).is_none() {
                deep += 1;
                if deep >= MAX_EXPR_DEPTH {
                    return Err(too_deep(self.span()));
                }
            }
            self.bump();
            let rhs = self.binary(prec)?;
            run.ops.push(op);
            run.terms.push(rhs);
        }
        Ok(run.build())
    }

    pub(super) fn unary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.unary_inner();
        self.leave();
        r
    }

    pub(super) fn unary_inner(&mut self) -> PResult<Expr> {
        let start = self.span();
        let op = match self.peek() {
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::BitNot),
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let e = self.unary()?;
            let sp = start.to(e.span);
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(e)),
                span: sp,
            });
        }
        // cast: ( Type ) expr
        if self.is("(") && self.is_cast() {
            self.bump();
            let t = self.ty()?;
            self.expect(")", "closing the cast")?;
            let e = self.unary()?;
            let sp = start.to(e.span);
            return Ok(Expr {
                kind: ExprKind::Cast(t, Box::new(e)),
                span: sp,
            });
        }
        self.postfix()
    }

    pub(super) fn is_cast(&self) -> bool {
        // `(` followed by a type and `)`, and then something that starts an expression
        match self.peek_at(1) {
            Tok::Ident(s)
                if matches!(
                    s.as_str(),
                    "bit" | "int" | "varbit" | "bool" | "error" | "tuple" | "list"
                ) =>
            {
                true
            }
            Tok::Ident(s) if self.is_type_name(s) => {
                // `(T) x` vs `(x)`: T is a type name; check the closing paren follows the type
                let mut k = 2;
                if matches!(self.peek_at(k), Tok::Punct("<")) {
                    let mut depth = 0i32;
                    loop {
                        match self.peek_at(k) {
                            Tok::Punct("<") => depth += 1,
                            Tok::Punct(">") => depth -= 1,
                            Tok::Punct(">>") => depth -= 2,
                            Tok::Eof => return false,
                            _ => {}
                        }
                        k += 1;
                        if depth <= 0 {
                            break;
                        }
                    }
                }
                matches!(self.peek_at(k), Tok::Punct(")"))
                    && !matches!(
                        self.peek_at(k + 1),
                        Tok::Punct(".") | Tok::Punct(";") | Tok::Punct(")")
                    )
            }
            _ => false,
        }
    }

    pub(super) fn postfix(&mut self) -> PResult<Expr> {
        let mut e = self.primary_expr()?;
        loop {
            let start = e.span;
            if self.is(".") {
                self.bump();
                let m = self.any_name("a member name")?;
                let sp = start.to(m.span);
                e = Expr {
                    kind: ExprKind::Member(Box::new(e), m),
                    span: sp,
                };
            } else if self.is("[") {
                self.bump();
                let a = self.expr()?;
                if (self.is("+") || self.is("-")) && matches!(self.peek_at(1), Tok::Punct(":")) {
                    // P4_16 1.2.5 indexed slices: `e[L +: W]` is `e[L+W-1 : L]`, `e[H -: W]` is
                    // `e[H : H-W+1]`
                    let up = self.is("+");
                    self.bump();
                    self.bump();
                    let w = self.expr()?;
                    let end = self.expect("]", "closing the slice")?;
                    let sp = a.span.to(w.span);
                    let bin = |op, x: Expr, y: Expr| Expr {
                        kind: ExprKind::Binary(op, Box::new(x), Box::new(y)),
                        span: sp,
                    };
                    let one = Expr {
                        kind: ExprKind::Int(IntLit {
                            value: 1.into(),
                            width: None,
                        }),
                        span: sp,
                    };
                    let (hi, lo) = if up {
                        (bin(BinOp::Sub, bin(BinOp::Add, a.clone(), w), one), a)
                    } else {
                        (a.clone(), bin(BinOp::Add, bin(BinOp::Sub, a, w), one))
                    };
                    e = Expr {
                        kind: ExprKind::Slice(Box::new(e), Box::new(hi), Box::new(lo)),
                        span: start.to(end),
                    };
                } else if self.eat(":") {
                    let b = self.expr()?;
                    let end = self.expect("]", "closing the slice")?;
                    e = Expr {
                        kind: ExprKind::Slice(Box::new(e), Box::new(a), Box::new(b)),
                        span: start.to(end),
                    };
                } else {
                    let end = self.expect("]", "closing the index")?;
                    e = Expr {
                        kind: ExprKind::Index(Box::new(e), Box::new(a)),
                        span: start.to(end),
                    };
                }
            } else if self.is("(") {
                let args = self.arguments()?;
                let sp = start.to(self.prev_span());
                e = Expr {
                    kind: ExprKind::Call {
                        callee: Box::new(e),
                        type_args: vec![],
                        args,
                    },
                    span: sp,
                };
            } else if self.is("<")
                && matches!(
                    e.kind,
                    ExprKind::Name(_) | ExprKind::DotName(_) | ExprKind::Member(..)
                )
                && self.generic_call_ahead()
            {
                self.bump();
                let mut targs = vec![];
                loop {
                    targs.push(self.type_arg()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect_close_angle()?;
                let args = self.arguments()?;
                let sp = start.to(self.prev_span());
                e = Expr {
                    kind: ExprKind::Call {
                        callee: Box::new(e),
                        type_args: targs,
                        args,
                    },
                    span: sp,
                };
            } else {
                break;
            }
        }
        Ok(e)
    }

    /// `f<T>(...)`: a `<` that opens type arguments of a call.
    pub(super) fn generic_call_ahead(&self) -> bool {
        let mut k = 1;
        let mut depth = 1i32;
        while depth > 0 {
            match self.peek_at(k) {
                Tok::Punct("<") => depth += 1,
                Tok::Punct(">") => depth -= 1,
                Tok::Punct(">>") => depth -= 2,
                Tok::Ident(s)
                    if self.is_type_name(s)
                        || matches!(
                            s.as_str(),
                            "bit" | "int" | "varbit" | "bool" | "error" | "tuple"
                        ) => {}
                Tok::Int(_)
                | Tok::Punct(",")
                | Tok::Punct("_")
                | Tok::Punct("[")
                | Tok::Punct("]")
                | Tok::Punct("(")
                | Tok::Punct(")") => {}
                _ => return false,
            }
            k += 1;
            if k > 64 {
                return false;
            }
        }
        // `a < (b >> c)`: a `>>` closing more than was opened is a shift, not the end of type
        // arguments
        depth == 0 && matches!(self.peek_at(k), Tok::Punct("("))
    }

    pub(super) fn primary_expr(&mut self) -> PResult<Expr> {
        let start = self.span();
        let t = self.peek().clone();
        match t {
            Tok::Int(i) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Int(i),
                    span: start,
                })
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Str(s),
                    span: start,
                })
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")", "closing the parenthesis")?;
                Ok(Expr {
                    kind: e.kind,
                    span: start.to(self.prev_span()),
                })
            }
            Tok::Punct("{") => {
                self.bump();
                if self.is("#") {
                    self.bump();
                    self.expect("}", "in `{#}`")?;
                    return Ok(Expr {
                        kind: ExprKind::Invalid,
                        span: start.to(self.prev_span()),
                    });
                }
                // struct initializer `{ a = 1, ... }` or list `{ 1, 2 }`
                if matches!(self.peek(), Tok::Ident(_))
                    && self.is_at(1, "=")
                    && !self.is_at(1, "==")
                {
                    let mut fields = vec![];
                    let mut has_rest = false;
                    while !self.is("}") {
                        if self.eat("...") {
                            has_rest = true;
                            break;
                        }
                        let n = self.any_name("a field name")?;
                        self.expect("=", "after the field name")?;
                        let v = self.expr()?;
                        fields.push((n, v));
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect("}", "closing the initializer")?;
                    return Ok(Expr {
                        kind: ExprKind::StructInit { fields, has_rest },
                        span: start.to(self.prev_span()),
                    });
                }
                let mut items = vec![];
                let mut rest = false;
                while !self.is("}") {
                    if self.eat("...") {
                        rest = true;
                        break;
                    }
                    items.push(self.expr()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}", "closing the list")?;
                let kind = if rest {
                    ExprKind::ListRest(items)
                } else {
                    ExprKind::List(items)
                };
                Ok(Expr {
                    kind,
                    span: start.to(self.prev_span()),
                })
            }
            Tok::Punct(".") => {
                self.bump();
                let n = self.any_name("a name")?;
                Ok(Expr {
                    kind: ExprKind::DotName(n),
                    span: start.to(self.prev_span()),
                })
            }
            Tok::Punct("_") => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::DontCare,
                    span: start,
                })
            }
            Tok::Ident(s) => match s.as_str() {
                "true" | "false" => {
                    self.bump();
                    Ok(Expr {
                        kind: ExprKind::Bool(s == "true"),
                        span: start,
                    })
                }
                "default" => {
                    self.bump();
                    Ok(Expr {
                        kind: ExprKind::Default,
                        span: start,
                    })
                }
                "bit" | "int" | "varbit" | "bool" | "tuple" => {
                    let t = self.ty()?;
                    Ok(Expr {
                        kind: ExprKind::Type(t),
                        span: start.to(self.prev_span()),
                    })
                }
                _ => {
                    // a specialized type used as a value: `Type<args>(...)` constructor or
                    // `T<..>.member`
                    if self.is_type_name(&s) && self.is_at(1, "<") && !self.generic_call_ahead_at(1)
                    {
                        let t = self.ty()?;
                        if self.is("(") {
                            let args = self.arguments()?;
                            return Ok(Expr {
                                kind: ExprKind::Construct { ty: t, args },
                                span: start.to(self.prev_span()),
                            });
                        }
                        return Ok(Expr {
                            kind: ExprKind::Type(t),
                            span: start.to(self.prev_span()),
                        });
                    }
                    self.bump();
                    Ok(Expr {
                        kind: ExprKind::Name(Ident {
                            name: s,
                            span: start,
                        }),
                        span: start,
                    })
                }
            },
            _ => Err(self.unexpected("an expression")),
        }
    }

    pub(super) fn generic_call_ahead_at(&self, _k: usize) -> bool {
        false
    }
}
