//! Parsing top-level and local declarations: types, externs, parsers, controls, tables, instances.

use super::*;

impl Parser {
    // ------------------------------------------------------------ declarations

    pub(super) fn declaration(&mut self) -> PResult<Decl> {
        self.enter()?;
        let r = self.declaration_inner();
        self.leave();
        r
    }

    pub(super) fn declaration_inner(&mut self) -> PResult<Decl> {
        let annos = self.annotations()?;
        let kw = match self.peek() {
            Tok::Ident(s) => s.clone(),
            _ => return Err(self.unexpected("a declaration")),
        };
        match kw.as_str() {
            "const" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.ident("a constant name")?;
                self.expect("=", "in a constant declaration")?;
                let value = self.expr()?;
                self.expect(";", "after the constant declaration")?;
                Ok(Decl::Const(ConstDecl {
                    annos,
                    ty,
                    name,
                    value,
                }))
            }
            "header" | "struct" | "header_union" => {
                self.bump();
                let kind = match kw.as_str() {
                    "header" => AggregateKind::Header,
                    "struct" => AggregateKind::Struct,
                    _ => AggregateKind::HeaderUnion,
                };
                let name = self.ident("a type name")?;
                self.add_type(&name.name);
                let type_params = self.type_params()?;
                self.push_type_scope(&type_params);
                self.expect("{", "opening the field list")?;
                let mut fields = vec![];
                while !self.is("}") {
                    let fa = self.annotations()?;
                    let ty = self.ty()?;
                    let fname = self.ident("a field name")?;
                    let ty = self.array_suffix(ty)?;
                    self.expect(";", "after the field")?;
                    fields.push(Field {
                        annos: fa,
                        ty,
                        name: fname,
                    });
                }
                self.bump();
                self.pop_type_scope();
                Ok(Decl::Aggregate(AggregateDecl {
                    annos,
                    kind,
                    name,
                    type_params,
                    fields,
                }))
            }
            "enum" => {
                self.bump();
                let repr = if self.is("bit") || self.is("int") {
                    Some(self.ty()?)
                } else {
                    None
                };
                let name = self.ident("an enum name")?;
                self.add_type(&name.name);
                self.expect("{", "opening the enum")?;
                let mut members = vec![];
                while !self.is("}") {
                    let _ = self.annotations()?;
                    let m = self.ident("an enum member")?;
                    let v = if self.eat("=") {
                        Some(self.expr()?)
                    } else {
                        None
                    };
                    members.push((m, v));
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}", "closing the enum")?;
                Ok(Decl::Enum(EnumDecl {
                    annos,
                    name,
                    repr,
                    members,
                }))
            }
            "error" | "match_kind" => {
                self.bump();
                self.expect("{", &format!("after `{kw}`"))?;
                let mut ids = vec![];
                while !self.is("}") {
                    ids.push(self.ident("a name")?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("}", "closing the list")?;
                Ok(if kw == "error" {
                    Decl::Error(ids)
                } else {
                    Decl::MatchKind(ids)
                })
            }
            "typedef" | "type" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.ident("a type name")?;
                self.add_type(&name.name);
                self.expect(";", "after the type definition")?;
                Ok(Decl::Typedef(TypedefDecl {
                    annos,
                    is_newtype: kw == "type",
                    ty,
                    name,
                }))
            }
            "extern" => {
                self.bump();
                // extern object or extern function
                let is_object = matches!(self.peek(), Tok::Ident(_))
                    && (self.is_at(1, "{") || self.is_at(1, "<") && !self.starts_type_at_fn());
                if is_object {
                    let name = self.ident("an extern name")?;
                    self.add_type(&name.name);
                    let type_params = self.type_params()?;
                    self.push_type_scope(&type_params);
                    self.expect("{", "opening the extern")?;
                    let mut members = vec![];
                    while !self.is("}") {
                        let ma = self.annotations()?;
                        let is_abstract = self.eat("abstract");
                        if matches!(self.peek(), Tok::Ident(s) if *s == name.name)
                            && self.is_at(1, "(")
                        {
                            let cname = self.ident("a constructor")?;
                            let params = self.params()?;
                            self.expect(";", "after the constructor")?;
                            members.push(ExternMember::Constructor {
                                annos: ma,
                                name: cname,
                                params,
                            });
                            continue;
                        }
                        let proto = self.function_proto(ma)?;
                        self.expect(";", "after the method")?;
                        members.push(ExternMember::Method { proto, is_abstract });
                    }
                    self.bump();
                    self.pop_type_scope();
                    Ok(Decl::Extern(ExternDecl {
                        annos,
                        name,
                        type_params,
                        members,
                    }))
                } else {
                    let proto = self.function_proto(annos)?;
                    self.expect(";", "after the extern function")?;
                    Ok(Decl::ExternFunction(proto))
                }
            }
            "action" => {
                self.bump();
                let name = self.ident("an action name")?;
                let params = self.params()?;
                let body = self.block()?;
                Ok(Decl::Action(ActionDecl {
                    annos,
                    name,
                    params,
                    body,
                }))
            }
            "parser" | "control" | "package" => {
                self.bump();
                let kind = match kw.as_str() {
                    "parser" => BlockKind::Parser,
                    "control" => BlockKind::Control,
                    _ => BlockKind::Package,
                };
                let name = self.ident("a name")?;
                self.add_type(&name.name);
                let type_params = self.type_params()?;
                self.push_type_scope(&type_params);
                let params = self.params()?;
                let sig = BlockTypeDecl {
                    annos,
                    kind,
                    name,
                    type_params,
                    params,
                };
                if self.eat(";") {
                    self.pop_type_scope();
                    return Ok(Decl::BlockType(sig));
                }
                if kind == BlockKind::Package {
                    self.pop_type_scope();
                    return Err(self.unexpected("`;` after the package declaration"));
                }
                let ctor_params = if self.is("(") { self.params()? } else { vec![] };
                self.expect("{", "opening the body")?;
                let r = if kind == BlockKind::Parser {
                    self.parser_body(sig, ctor_params)
                } else {
                    self.control_body(sig, ctor_params)
                };
                self.pop_type_scope();
                r
            }
            "table" => {
                self.bump();
                let name = self.ident("a table name")?;
                self.table_body(annos, name)
            }
            "value_set" => {
                self.bump();
                self.expect("<", "after value_set")?;
                let elem = self.type_arg()?;
                self.expect_close_angle()?;
                self.expect("(", "before the value set size")?;
                let size = self.expr()?;
                self.expect(")", "after the value set size")?;
                let name = self.ident("a value set name")?;
                self.expect(";", "after the value set")?;
                Ok(Decl::ValueSet(ValueSetDecl {
                    annos,
                    elem,
                    size,
                    name,
                }))
            }
            _ => {
                // function, variable, or instantiation: all start with a type
                if !self.starts_type() {
                    return Err(self.unexpected("a declaration"));
                }
                let ty = self.ty()?;
                if self.is("(") {
                    // instantiation: Type(args) name [= { ... }];
                    let args = self.arguments()?;
                    let name = self.ident("an instance name")?;
                    let mut initializer = vec![];
                    if self.eat("=") {
                        self.expect("{", "opening the instance initializer")?;
                        while !self.is("}") {
                            initializer.push(self.declaration()?);
                        }
                        self.bump();
                    }
                    self.expect(";", "after the instantiation")?;
                    return Ok(Decl::Instantiation(Instantiation {
                        annos,
                        ty,
                        args,
                        name,
                        initializer,
                    }));
                }
                let name = self.ident("a name")?;
                if self.is("<") || self.is("(") {
                    // function declaration
                    let type_params = self.type_params()?;
                    self.push_type_scope(&type_params);
                    let params = self.params()?;
                    let body = self.block()?;
                    self.pop_type_scope();
                    return Ok(Decl::Function(FunctionDecl {
                        proto: FunctionProto {
                            annos,
                            ret: ty,
                            name,
                            type_params,
                            params,
                        },
                        body,
                    }));
                }
                let ty = self.array_suffix(ty)?;
                let init = if self.eat("=") {
                    Some(self.expr()?)
                } else {
                    None
                };
                self.expect(";", "after the variable declaration")?;
                Ok(Decl::Var(VarDecl {
                    annos,
                    ty,
                    name,
                    init,
                }))
            }
        }
    }

    /// After `extern`: `Name<T>(` is a generic extern function only if preceded by a return type.
    pub(super) fn starts_type_at_fn(&self) -> bool {
        false
    }

    pub(super) fn function_proto(&mut self, annos: Annotations) -> PResult<FunctionProto> {
        // return type, then name, type params, params; type params must be in scope for the return
        // type when the return type is a type parameter (`T lookahead<T>()`): pre-scan for `name
        // <`.
        let save = self.pos;
        let mut pre_params = vec![];
        // find the pattern <type> <ident> '<' ... by scanning to the first '(' at depth 0
        let mut k = 0;
        while !matches!(
            self.peek_at(k),
            Tok::Punct("(") | Tok::Punct(";") | Tok::Eof
        ) {
            k += 1;
        }
        // if the token before '(' is '>', the type params are right before
        if k >= 2 && matches!(self.peek_at(k - 1), Tok::Punct(">")) {
            let mut j = k - 1;
            while j > 0 && !matches!(self.peek_at(j), Tok::Punct("<")) {
                j -= 1;
            }
            let mut m = j + 1;
            while m < k - 1 {
                if let Tok::Ident(s) = self.peek_at(m) {
                    pre_params.push(Ident {
                        name: s.clone(),
                        span: self.span(),
                    });
                }
                m += 1;
            }
        }
        self.pos = save;
        self.push_type_scope(&pre_params);
        let ret = self.ty()?;
        let name = self.any_name("a function name")?;
        let type_params = self.type_params()?;
        self.push_type_scope(&type_params);
        let params = self.params()?;
        self.pop_type_scope();
        self.pop_type_scope();
        Ok(FunctionProto {
            annos,
            ret,
            name,
            type_params,
            params,
        })
    }

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

    pub(super) fn control_body(
        &mut self,
        sig: BlockTypeDecl,
        ctor_params: Vec<Param>,
    ) -> PResult<Decl> {
        let mut locals = vec![];
        let mut apply = None;
        while !self.is("}") {
            if self.is("apply") && self.is_at(1, "{") {
                self.bump();
                apply = Some(self.block()?);
                continue;
            }
            if self.at_eof() {
                return Err(self.unexpected("`}` closing the control"));
            }
            locals.push(self.declaration()?);
        }
        self.bump();
        let apply = apply.ok_or_else(|| {
            Diagnostic::new(
                sig.name.span,
                format!("control `{}` has no apply block", sig.name.name),
            )
        })?;
        Ok(Decl::Control(ControlDecl {
            sig,
            ctor_params,
            locals,
            apply,
        }))
    }

    pub(super) fn table_body(&mut self, annos: Annotations, name: Ident) -> PResult<Decl> {
        self.expect("{", "opening the table")?;
        let mut props = vec![];
        while !self.is("}") {
            let pa = self.annotations()?;
            let is_const = self.eat("const");
            let pname = self.any_name("a table property")?;
            let start = pname.span;
            match pname.name.as_str() {
                "key" => {
                    self.expect("=", "after key")?;
                    self.expect("{", "opening the key")?;
                    let mut elements = vec![];
                    while !self.is("}") {
                        let expr = self.expr()?;
                        self.expect(":", "after the key expression")?;
                        let match_kind = self.any_name("a match kind")?;
                        let ka = self.annotations()?;
                        self.expect(";", "after the key element")?;
                        elements.push(KeyElement {
                            annos: ka,
                            expr,
                            match_kind,
                        });
                    }
                    let end = self.bump().span;
                    self.eat(";");
                    props.push(TableProp::Key {
                        annos: pa,
                        elements,
                        span: start.to(end),
                    });
                }
                "actions" => {
                    self.expect("=", "after actions")?;
                    self.expect("{", "opening the action list")?;
                    let mut actions = vec![];
                    while !self.is("}") {
                        let aa = self.annotations()?;
                        let expr = self.expr()?;
                        self.expect(";", "after the action")?;
                        actions.push(ActionRef { annos: aa, expr });
                    }
                    let end = self.bump().span;
                    self.eat(";");
                    props.push(TableProp::Actions {
                        annos: pa,
                        actions,
                        span: start.to(end),
                    });
                }
                "default_action" => {
                    self.expect("=", "after default_action")?;
                    let action = self.expr()?;
                    let end = self.expect(";", "after the default action")?;
                    props.push(TableProp::DefaultAction {
                        annos: pa,
                        is_const,
                        action,
                        span: start.to(end),
                    });
                }
                "entries" => {
                    self.expect("=", "after entries")?;
                    self.expect("{", "opening the entries")?;
                    let mut entries = vec![];
                    while !self.is("}") {
                        let estart = self.span();
                        let mut ea = self.annotations()?;
                        let e_const = self.eat("const");
                        let priority = if self.is("priority") && self.is_at(1, "=") {
                            self.bump();
                            self.bump();
                            let p = self.expr()?;
                            self.expect(":", "after the entry priority")?;
                            Some(p)
                        } else {
                            None
                        };
                        let keyset = self.keyset()?;
                        self.expect(":", "after the entry keyset")?;
                        let action = self.expr()?;
                        let mut trailing = self.annotations()?;
                        ea.append(&mut trailing);
                        let end = self.expect(";", "after the entry")?;
                        entries.push(TableEntry {
                            annos: ea,
                            is_const: e_const,
                            keyset,
                            action,
                            priority,
                            span: estart.to(end),
                        });
                    }
                    let end = self.bump().span;
                    self.eat(";");
                    props.push(TableProp::Entries {
                        annos: pa,
                        is_const,
                        entries,
                        span: start.to(end),
                    });
                }
                _ => {
                    self.expect("=", "after the table property name")?;
                    let value = self.initializer_expr()?;
                    self.expect(";", "after the table property")?;
                    props.push(TableProp::Other {
                        annos: pa,
                        is_const,
                        name: pname,
                        value,
                    });
                }
            }
        }
        self.bump();
        Ok(Decl::Table(TableDecl { annos, name, props }))
    }

    /// A property value, which may be a constructor call like `action_selector(HashAlgorithm.crc16,
    /// 32w64, 32w16)` or a specialized one `direct_meter<bit<32>>(MeterType.packets)`.
    pub(super) fn initializer_expr(&mut self) -> PResult<Expr> {
        if let Tok::Ident(n) = self.peek().clone() {
            if self.is_type_name(&n) && self.is_at(1, "<") {
                let ty = self.ty()?;
                let args = self.arguments()?;
                let sp = ty.span.to(self.prev_span());
                return Ok(Expr {
                    kind: ExprKind::Construct { ty, args },
                    span: sp,
                });
            }
        }
        self.expr()
    }
}
