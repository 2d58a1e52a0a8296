//! Parsing top-level and local declarations: constants, types, errors and match kinds, externs,
//! functions, actions, instances, value sets, and the headers of parsers, controls and tables
//! (their bodies are parsed in `parsers.rs`, `controls.rs` and `tables.rs`).

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
