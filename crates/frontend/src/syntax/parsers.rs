//! Parsing parser declarations' bodies: local declarations, states, transitions and `select`
//! keysets (masks, ranges, value sets, tuples).

use super::*;

impl Parser {
    pub(super) fn parser_body(
        &mut self,
        sig: BlockTypeDecl,
        ctor_params: Vec<Param>,
    ) -> PResult<Decl> {
        let mut locals = vec![];
        let mut states = vec![];
        while !self.is("}") {
            let save = self.pos;
            let annos = self.annotations()?;
            if self.is("state") {
                self.bump();
                let name = self.ident("a state name")?;
                let start = name.span;
                self.expect("{", "opening the state")?;
                let mut body = vec![];
                let mut transition = None;
                while !self.is("}") {
                    if self.is("transition") {
                        self.bump();
                        transition = Some(self.transition()?);
                        break;
                    }
                    body.push(self.stmt()?);
                }
                let end = self.expect("}", "closing the state")?;
                states.push(ParserState {
                    annos,
                    name,
                    body,
                    transition,
                    span: start.to(end),
                });
            } else {
                self.pos = save;
                locals.push(self.declaration()?);
            }
        }
        self.bump();
        Ok(Decl::Parser(ParserDecl {
            sig,
            ctor_params,
            locals,
            states,
        }))
    }

    pub(super) fn transition(&mut self) -> PResult<Transition> {
        if self.is("select") {
            let start = self.bump().span;
            self.expect("(", "after select")?;
            let mut exprs = vec![];
            while !self.is(")") {
                exprs.push(self.expr()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(")", "closing the select expressions")?;
            self.expect("{", "opening the select cases")?;
            let mut cases = vec![];
            while !self.is("}") {
                let _ = self.annotations()?;
                let keyset = self.keyset()?;
                self.expect(":", "after the keyset")?;
                let next = self.ident("a state name")?;
                self.expect(";", "after the select case")?;
                cases.push(SelectCase { keyset, next });
            }
            let end = self.bump().span;
            self.eat(";");
            Ok(Transition::Select {
                exprs,
                cases,
                span: start.to(end),
            })
        } else {
            let id = self.ident("a state name or select")?;
            self.expect(";", "after the transition")?;
            Ok(Transition::Direct(id))
        }
    }

    /// A keyset: `default`, `_`, an expression, `e &&& m`, `a .. b`, or a tuple `(k1, k2)`.
    pub(super) fn keyset(&mut self) -> PResult<Expr> {
        if self.is("(") {
            // tuple keyset or parenthesized expression
            let start = self.span();
            let save = self.pos;
            self.bump();
            let mut items = vec![];
            loop {
                items.push(self.simple_keyset()?);
                if !self.eat(",") {
                    break;
                }
            }
            if self.eat(")") && (items.len() > 1 || self.is(":")) {
                if items.len() == 1 {
                    return Ok(items.pop().unwrap());
                }
                return Ok(Expr {
                    kind: ExprKind::List(items),
                    span: start.to(self.prev_span()),
                });
            }
            self.pos = save;
        }
        self.simple_keyset()
    }

    pub(super) fn simple_keyset(&mut self) -> PResult<Expr> {
        let start = self.span();
        if self.eat("default") {
            return Ok(Expr {
                kind: ExprKind::Default,
                span: start,
            });
        }
        if self.is("_") {
            self.bump();
            return Ok(Expr {
                kind: ExprKind::DontCare,
                span: start,
            });
        }
        let e = self.expr()?;
        if self.eat("&&&") {
            let m = self.expr()?;
            let sp = start.to(m.span);
            return Ok(Expr {
                kind: ExprKind::Mask(Box::new(e), Box::new(m)),
                span: sp,
            });
        }
        if self.eat("..") {
            let hi = self.expr()?;
            let sp = start.to(hi.span);
            return Ok(Expr {
                kind: ExprKind::Range(Box::new(e), Box::new(hi)),
                span: sp,
            });
        }
        Ok(e)
    }
}
