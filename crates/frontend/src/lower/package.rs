//! The v1model package: `main` elaborated as `V1Switch(parser, verifyChecksum, ingress, egress,
//! computeChecksum, deparser)`, each block bound to the pipeline's global storage, and the
//! `@field_list` ids of its metadata collected.

use super::env::*;
use super::lowerer::{err, Lowerer, Pipeline};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::{Diagnostic, PResult};
use crate::semantic_types::*;
use p4sec_ir as ir;

impl<'t> Lowerer<'t> {
    pub fn elaborate_main(&mut self, prog: &ast::Program) -> PResult<()> {
        let main = prog
            .decls
            .iter()
            .rev()
            .find_map(|d| match d {
                ast::Decl::Instantiation(i) if i.name.name == "main" => Some(i.clone()),
                _ => None,
            })
            .ok_or_else(|| {
                Diagnostic::new(
                    Span::default(),
                    "the program has no `main` package instantiation",
                )
            })?;
        let g = self.global.clone();
        let pkg = match self.type_base(&g, &main.ty) {
            Some(Binding::BlockType(b)) if b.kind == ast::BlockKind::Package => b,
            _ => return err(main.ty.span, "`main` must instantiate a package (V1Switch)"),
        };
        if pkg.name.name != "V1Switch" {
            return err(
                main.ty.span,
                format!(
                    "p4sec runs the v1model architecture (V1Switch); `{}` is not supported",
                    pkg.name.name
                ),
            );
        }
        // `V1Switch(p = P(), ig = I(), ...)`: named arguments in any order
        let mut main = main;
        if main.args.iter().any(|a| a.name.is_some()) {
            let ordered = self.order_args(&pkg.params, &main.args, main.name.span)?;
            let mut args = vec![];
            for (p, a) in pkg.params.iter().zip(ordered) {
                let Some(v) = a else {
                    return err(
                        main.name.span,
                        format!("V1Switch argument `{}` is missing", p.name.name),
                    );
                };
                args.push(ast::Argument {
                    name: None,
                    value: v.clone(),
                });
            }
            main.args = args;
        }
        for a in main.annos.iter().filter(|a| a.name.name == "pkginfo") {
            match &a.body {
                ast::AnnotationBody::KeyValues(kvs) => {
                    for (k, v) in kvs {
                        if let ExprKind::Str(s) = &v.kind {
                            self.p4meta.pkg_info.push((k.name.clone(), s.clone()));
                        }
                    }
                }
                // `@pkginfo(name="x", version="1")`: tokens `name = "x" , version = "1"`
                _ => {
                    let toks: Vec<&str> = a.text.split(' ').collect();
                    for w in toks.windows(3) {
                        if w[1] == "="
                            && w[2].len() >= 2
                            && w[2].starts_with('"')
                            && w[2].ends_with('"')
                        {
                            self.p4meta
                                .pkg_info
                                .push((w[0].to_string(), w[2][1..w[2].len() - 1].to_string()));
                        }
                    }
                }
            }
        }
        if main.args.len() != 6 {
            return err(
                main.name.span,
                format!("V1Switch takes 6 blocks, {} given", main.args.len()),
            );
        }
        let mut insts = vec![];
        for a in &main.args {
            let v = self.ctor_arg(&g, &a.value)?;
            match v {
                Val::Binding(Binding::Instance(i)) => insts.push(i),
                _ => return err(a.value.span, "expected a parser or control instantiation"),
            }
        }
        // global storage from the parser's signature
        let Instance::Parser { decl: pdecl, .. } = &*insts[0] else {
            return err(
                main.args[0].value.span,
                "the first V1Switch argument must be a parser",
            );
        };
        if pdecl.sig.params.len() != 4 {
            return err(pdecl.sig.name.span, "the v1model parser must have 4 parameters (packet_in, out H, inout M, inout standard_metadata_t)");
        }
        let h_ty = self.resolve_type(&g, &pdecl.sig.params[1].ty)?;
        let m_ty = self.resolve_type(&g, &pdecl.sig.params[2].ty)?;
        let s_ty = self.resolve_type(&g, &pdecl.sig.params[3].ty)?;
        let hdr = self.alloc(&h_ty, "hdr", pdecl.sig.params[1].name.span)?;
        let meta = self.alloc(&m_ty, "meta", pdecl.sig.params[2].name.span)?;
        let std = self.alloc(&s_ty, "standard_metadata", pdecl.sig.params[3].name.span)?;
        self.std_meta = Some(std.clone());
        self.collect_field_lists(&m_ty, &meta);
        // global initializers (aggregate constants) run at the start of the parser
        let global_init = std::mem::take(&mut self.out[0]);

        // parser
        let pnext = ir::Next::Accept;
        let binds = vec![
            Binding::PacketIn,
            Binding::Var(hdr.clone()),
            Binding::Var(meta.clone()),
            Binding::Var(std.clone()),
        ];
        let entry = self.lower_parser_instance(
            &insts[0],
            binds,
            pnext,
            global_init,
            main.args[0].value.span,
        )?;
        let parser = ir::Parser {
            name: pdecl.sig.name.name.clone(),
            states: std::mem::take(&mut self.pstates),
            start: entry,
        };

        let sigs: [(usize, Vec<Binding>); 5] = [
            (
                1,
                vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone())],
            ),
            (
                2,
                vec![
                    Binding::Var(hdr.clone()),
                    Binding::Var(meta.clone()),
                    Binding::Var(std.clone()),
                ],
            ),
            (
                3,
                vec![
                    Binding::Var(hdr.clone()),
                    Binding::Var(meta.clone()),
                    Binding::Var(std.clone()),
                ],
            ),
            (
                4,
                vec![Binding::Var(hdr.clone()), Binding::Var(meta.clone())],
            ),
            (5, vec![Binding::PacketOut, Binding::Var(hdr.clone())]),
        ];
        let mut blocks = vec![];
        for (i, binds) in sigs {
            let Instance::Control { decl, .. } = &*insts[i] else {
                return err(main.args[i].value.span, "expected a control");
            };
            let name = decl.sig.name.name.clone();
            let (_, body) =
                self.capture(|l| l.top_control(&insts[i], binds, main.args[i].value.span))?;
            blocks.push(ir::Control { name, body });
        }
        self.pipeline = Some(Pipeline { parser, blocks });
        Ok(())
    }

    pub(super) fn collect_field_lists(&mut self, t: &Ty, p: &Place) {
        if let (Ty::Agg(a), Place::Struct { fields, .. }) = (t, p) {
            for (f, (_, fp)) in a.fields.iter().zip(fields.iter()) {
                for id in &f.field_lists {
                    self.field_lists
                        .entry(*id)
                        .or_default()
                        .extend(fp.scalar_locs());
                }
                self.collect_field_lists(&f.ty, fp);
            }
        }
    }
}
