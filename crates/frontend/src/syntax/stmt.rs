//! Parsing blocks and statements.

use super::*;

/// The compound assignment operators (`a op= b` is `a = a op b`, the l-value evaluated once), in
/// statements and in the clauses of a `for` header.
const COMPOUND_ASSIGNMENTS: [(&str, BinOp); 12] = [
    ("+=", BinOp::Add),
    ("-=", BinOp::Sub),
    ("*=", BinOp::Mul),
    ("/=", BinOp::Div),
    ("%=", BinOp::Mod),
    ("<<=", BinOp::Shl),
    (">>=", BinOp::Shr),
    ("&=", BinOp::BitAnd),
    ("|=", BinOp::BitOr),
    ("^=", BinOp::BitXor),
    ("|+|=", BinOp::AddSat),
    ("|-|=", BinOp::SubSat),
];

impl Parser {
    // ------------------------------------------------------------ statements

    pub(super) fn block(&mut self) -> PResult<Block> {
        let annos = self.annotations()?;
        let start = self.expect("{", "opening a block")?;
        let mut stmts = vec![];
        while !self.is("}") {
            if self.at_eof() {
                return Err(self.unexpected("`}` closing the block"));
            }
            stmts.push(self.stmt()?);
        }
        let end = self.bump().span;
        Ok(Block {
            annos,
            stmts,
            span: start.to(end),
        })
    }

    pub(super) fn stmt(&mut self) -> PResult<Stmt> {
        self.enter()?;
        let r = self.stmt_inner();
        self.leave();
        r
    }

    pub(super) fn stmt_inner(&mut self) -> PResult<Stmt> {
        let start = self.span();
        if self.is("@") {
            // annotated statement: block or declaration
            let save = self.pos;
            let annos = self.annotations()?;
            if self.is("{") {
                let mut b = self.block()?;
                b.annos = annos;
                let sp = b.span;
                return Ok(Stmt {
                    kind: StmtKind::Block(b),
                    span: sp,
                });
            }
            self.pos = save;
            let _ = self.annotations()?;
            return self.stmt_inner();
        }
        let kw = match self.peek() {
            Tok::Ident(s) => s.clone(),
            Tok::Punct("{") => {
                let b = self.block()?;
                let sp = b.span;
                return Ok(Stmt {
                    kind: StmtKind::Block(b),
                    span: sp,
                });
            }
            Tok::Punct(";") => {
                self.bump();
                return Ok(Stmt {
                    kind: StmtKind::Empty,
                    span: start,
                });
            }
            _ => String::new(),
        };
        let mk = |kind, p: &Parser| Stmt {
            kind,
            span: start.to(p.prev_span()),
        };
        match kw.as_str() {
            "if" => {
                self.bump();
                self.expect("(", "after if")?;
                let c = self.expr()?;
                self.expect(")", "closing the condition")?;
                let then = self.stmt()?;
                let else_ = if self.eat("else") {
                    Some(Box::new(self.stmt()?))
                } else {
                    None
                };
                Ok(mk(StmtKind::If(c, Box::new(then), else_), self))
            }
            "break" | "continue" => {
                self.bump();
                self.expect(
                    ";",
                    if kw == "break" {
                        "after break"
                    } else {
                        "after continue"
                    },
                )?;
                Ok(mk(
                    if kw == "break" {
                        StmtKind::Break
                    } else {
                        StmtKind::Continue
                    },
                    self,
                ))
            }
            "for" => {
                self.bump();
                self.expect("(", "after for")?;
                // `for (@anno T x in e)`: annotations on the loop variable (they change nothing here)
                let var_annos = self.is("@");
                if var_annos {
                    self.annotations()?;
                }
                // `for (x in e)` / `for (T x in e)`
                if matches!(self.peek(), Tok::Ident(_)) && self.is_at(1, "in") {
                    let var = self.ident("a loop variable")?;
                    self.bump();
                    return self.for_in(None, var, start);
                }
                let mut init = vec![];
                if self.starts_type() && self.looks_like_decl() {
                    let ds = self.span();
                    let ty = self.ty()?;
                    let name = self.ident("a loop variable")?;
                    if self.eat("in") {
                        return self.for_in(Some(ty), name, start);
                    }
                    if var_annos {
                        return Err(self.unexpected(
                            "`in` (annotations come before the variable of a `for`-in loop only)",
                        ));
                    }
                    self.expect("=", "initializing the loop variable")?;
                    let e = self.expr()?;
                    init.push(Stmt {
                        kind: StmtKind::Var(VarDecl {
                            annos: vec![],
                            ty,
                            name,
                            init: Some(e),
                        }),
                        span: ds.to(self.prev_span()),
                    });
                    if !self.is(";") {
                        self.expect(",", "between the loop initializers")?;
                    }
                }
                while !self.is(";") {
                    init.push(self.for_clause()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect(";", "after the loop initializers")?;
                let cond = if self.is(";") {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect(";", "after the loop condition")?;
                let mut update = vec![];
                while !self.is(")") {
                    update.push(self.for_clause()?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect(")", "closing the loop header")?;
                let body = self.stmt()?;
                Ok(mk(
                    StmtKind::For {
                        init,
                        cond,
                        update,
                        body: Box::new(body),
                    },
                    self,
                ))
            }
            "exit" => {
                self.bump();
                self.expect(";", "after exit")?;
                Ok(mk(StmtKind::Exit, self))
            }
            "return" => {
                self.bump();
                let e = if self.is(";") {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect(";", "after return")?;
                Ok(mk(StmtKind::Return(e), self))
            }
            "switch" => {
                self.bump();
                self.expect("(", "after switch")?;
                let e = self.expr()?;
                self.expect(")", "closing the switch expression")?;
                self.expect("{", "opening the switch cases")?;
                let mut cases = vec![];
                while !self.is("}") {
                    let cs = self.span();
                    let label = if self.eat("default") {
                        SwitchLabel::Default
                    } else {
                        SwitchLabel::Expr(self.expr()?)
                    };
                    self.expect(":", "after the switch label")?;
                    let body = if self.is("{") {
                        Some(self.block()?)
                    } else {
                        None
                    };
                    cases.push(SwitchCase {
                        label,
                        body,
                        span: cs.to(self.prev_span()),
                    });
                }
                self.bump();
                Ok(mk(StmtKind::Switch(e, cases), self))
            }
            "const" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.ident("a constant name")?;
                self.expect("=", "in the constant declaration")?;
                let value = self.expr()?;
                self.expect(";", "after the constant declaration")?;
                Ok(mk(
                    StmtKind::Const(ConstDecl {
                        annos: vec![],
                        ty,
                        name,
                        value,
                    }),
                    self,
                ))
            }
            _ => {
                // variable declaration or expression statement
                if self.starts_type() && self.looks_like_decl() {
                    let ty = self.ty()?;
                    if self.is("(") {
                        return Err(Diagnostic::new(start, "an extern, parser or control cannot be instantiated inside a parser state, an action, a function or an apply block; declare the instance among the local declarations of the parser or control, or at top level"));
                    }
                    let name = self.ident("a variable name")?;
                    let ty = self.array_suffix(ty)?;
                    let init = if self.eat("=") {
                        Some(self.expr()?)
                    } else {
                        None
                    };
                    self.expect(";", "after the variable declaration")?;
                    return Ok(mk(
                        StmtKind::Var(VarDecl {
                            annos: vec![],
                            ty,
                            name,
                            init,
                        }),
                        self,
                    ));
                }
                let lhs = self.expr()?;
                for (op, bop) in COMPOUND_ASSIGNMENTS {
                    if self.eat(op) {
                        let rhs = self.expr()?;
                        self.expect(";", "after the assignment")?;
                        return Ok(mk(StmtKind::OpAssign(bop, lhs, rhs), self));
                    }
                }
                if self.eat("=") {
                    let rhs = self.expr()?;
                    self.expect(";", "after the assignment")?;
                    return Ok(mk(StmtKind::Assign(lhs, rhs), self));
                }
                if matches!(lhs.kind, ExprKind::Call { .. } | ExprKind::Construct { .. }) {
                    if let (Tok::Ident(name), true) = (self.peek().clone(), self.is_at(1, ";")) {
                        // `Type(args) name;` among statements: an instantiation where the spec
                        // allows none
                        return Err(Diagnostic::new(
                            self.toks[self.pos].span,
                            format!(
                                "instantiation of `{name}`: an extern, parser or control cannot be instantiated inside a parser state, an action, \
                                 a function or an apply block; declare `{name}` among the local declarations of the parser or control (before its \
                                 states or `apply`), or at top level"
                            ),
                        ));
                    }
                    self.expect(";", "after the call")?;
                    return Ok(mk(StmtKind::Call(lhs), self));
                }
                Err(self.unexpected("`=` or `;` (a statement must be an assignment or a call)"))
            }
        }
    }

    /// The rest of `for (T x in ` ...: a range `a .. b` or an expression, `)`, the body.
    fn for_in(&mut self, ty: Option<Type>, var: Ident, start: Span) -> PResult<Stmt> {
        let e = self.expr()?;
        let coll = if self.eat("..") {
            ForInColl::Range(e, self.expr()?)
        } else {
            ForInColl::Expr(e)
        };
        self.expect(")", "closing the loop header")?;
        let body = self.stmt()?;
        Ok(Stmt {
            kind: StmtKind::ForIn {
                ty,
                var,
                coll,
                body: Box::new(body),
            },
            span: start.to(self.prev_span()),
        })
    }

    /// One clause of a `for` header: a declaration with an initializer, an assignment (`=` or
    /// `op=`) or a call, without the terminating `;`.
    fn for_clause(&mut self) -> PResult<Stmt> {
        let start = self.span();
        if self.starts_type() && self.looks_like_decl() {
            let ty = self.ty()?;
            let name = self.ident("a loop variable")?;
            self.expect("=", "initializing the loop variable")?;
            let e = self.expr()?;
            return Ok(Stmt {
                kind: StmtKind::Var(VarDecl {
                    annos: vec![],
                    ty,
                    name,
                    init: Some(e),
                }),
                span: start.to(self.prev_span()),
            });
        }
        let lhs = self.expr()?;
        for (op, bop) in COMPOUND_ASSIGNMENTS {
            if self.eat(op) {
                let rhs = self.expr()?;
                return Ok(Stmt {
                    kind: StmtKind::OpAssign(bop, lhs, rhs),
                    span: start.to(self.prev_span()),
                });
            }
        }
        if self.eat("=") {
            let rhs = self.expr()?;
            return Ok(Stmt {
                kind: StmtKind::Assign(lhs, rhs),
                span: start.to(self.prev_span()),
            });
        }
        if matches!(lhs.kind, ExprKind::Call { .. }) {
            return Ok(Stmt {
                kind: StmtKind::Call(lhs),
                span: start.to(self.prev_span()),
            });
        }
        Err(self.unexpected("an assignment or a call in the `for` header"))
    }

    /// After a type-looking start: is this `Type name ...` (declaration) rather than an expression?
    pub(super) fn looks_like_decl(&self) -> bool {
        // scan over a type: ident [ <...> ] [ [N] ]* then expect an identifier
        let mut k = 0;
        if matches!(self.peek_at(k), Tok::Punct(".")) {
            k += 1;
        }
        match self.peek_at(k) {
            Tok::Ident(_) | Tok::Punct("_") => k += 1,
            _ => return false,
        }
        if matches!(self.peek_at(k), Tok::Punct("<")) {
            let mut depth = 0i32;
            loop {
                match self.peek_at(k) {
                    Tok::Punct("<") => depth += 1,
                    Tok::Punct(">") => depth -= 1,
                    Tok::Punct(">>") => depth -= 2,
                    Tok::Punct(";") | Tok::Punct("{") | Tok::Eof => return false,
                    _ => {}
                }
                k += 1;
                if depth <= 0 {
                    break;
                }
            }
        }
        while matches!(self.peek_at(k), Tok::Punct("[")) {
            while !matches!(self.peek_at(k), Tok::Punct("]") | Tok::Eof) {
                k += 1;
            }
            k += 1;
        }
        matches!(self.peek_at(k), Tok::Ident(_))
    }

    // ------------------------------------------------------------ expressions

    pub(super) fn arguments(&mut self) -> PResult<Vec<Argument>> {
        self.expect("(", "opening the arguments")?;
        let mut v = vec![];
        while !self.is(")") {
            let name = if matches!(self.peek(), Tok::Ident(_))
                && self.is_at(1, "=")
                && !self.is_at(1, "==")
            {
                let n = self.any_name("an argument name")?;
                self.bump();
                Some(n)
            } else {
                None
            };
            let value = if self.is("_") && (self.is_at(1, ",") || self.is_at(1, ")")) {
                let sp = self.bump().span;
                Expr {
                    kind: ExprKind::DontCare,
                    span: sp,
                }
            } else {
                self.expr()?
            };
            v.push(Argument { name, value });
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")", "closing the arguments")?;
        Ok(v)
    }
}
