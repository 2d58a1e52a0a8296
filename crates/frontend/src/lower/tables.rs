//! Lowering tables: keys and keysets, match kinds, const entries, `NoAction`, table externs
//! (counters, meters, implementations) and the source text of key names; the actions a table
//! calls are lowered in `actions.rs`.

use super::annotations::*;
use super::env::*;
use super::lowerer::{err, Lowerer};
use crate::ast::ExprKind;
use crate::ast::{self, Span};
use crate::diag::PResult;
use crate::semantic_types::*;
use num_bigint::BigInt;
use num_traits::ToPrimitive;
use p4sec_ir as ir;
use std::rc::Rc;

impl<'t> Lowerer<'t> {
    pub(super) fn const_of(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
        t: &Ty,
    ) -> PResult<ir::Value> {
        let w = t.scalar_width().unwrap_or(32);
        match self.expr(scope, e, Some(t))? {
            Val::Const(c, _) => Ok(to_value(&c, w)),
            _ => err(e.span, "keyset elements must be compile-time constants"),
        }
    }

    pub(super) fn key_match(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
        t: &Ty,
    ) -> PResult<ir::KeyMatch> {
        Ok(match &e.kind {
            ExprKind::Default | ExprKind::DontCare => ir::KeyMatch::Any,
            ExprKind::Mask(v, m) => ir::KeyMatch::Mask {
                value: self.const_of(scope, v, t)?,
                mask: self.const_of(scope, m, t)?,
            },
            ExprKind::Range(lo, hi) => ir::KeyMatch::Range {
                lo: self.const_of(scope, lo, t)?,
                hi: self.const_of(scope, hi, t)?,
            },
            ExprKind::Name(n) if matches!(scope.lookup(&n.name), Some(Binding::ValueSet(..))) => {
                let Some(Binding::ValueSet(id, _)) = scope.lookup(&n.name) else {
                    unreachable!()
                };
                let vs = &self.value_sets[id as usize];
                if vs.widths.len() != 1 {
                    return err(
                        e.span,
                        format!("value set `{}` has {} elements: it must be the whole keyset of a select with as many keys", n.name, vs.widths.len()),
                    );
                }
                ir::KeyMatch::ValueSet(id)
            }
            _ => ir::KeyMatch::Exact(self.const_of(scope, e, t)?),
        })
    }

    pub fn lower_table(&mut self, scope: &Rc<Scope>, t: &ast::TableDecl) -> PResult<Rc<TableInfo>> {
        let name = self.cp_name(&t.annos, &t.name.name);
        let id = self.p4info_id_of(&t.annos, 0x02, &name);
        self.note_annos(format!("table {name}"), &t.annos)?;
        let mut table = ir::Table {
            name: name.clone(),
            id,
            keys: vec![],
            actions: vec![],
            default_action: ir::ActionCall {
                action: 0,
                args: vec![],
            },
            default_is_const: false,
            entries: vec![],
            entries_are_const: false,
            size: 1024,
            implementation: ir::Implementation::None,
            direct_counter: None,
            direct_meter: None,
            support_timeout: false,
        };
        let mut names = vec![];
        let mut default_expr = None;
        let mut entries = None;
        let mut key_prelude = vec![];
        for p in &t.props {
            match p {
                ast::TableProp::Key { elements, .. } => {
                    // keys with side effects: every key is computed into a temporary, in order,
                    // before the lookup
                    let mut lowered = vec![];
                    for k in elements {
                        let (r, pre) = self.capture(|l| {
                            let v = l.expr(scope, &k.expr, None)?;
                            l.rvalue(v, None, k.expr.span)
                        })?;
                        lowered.push((r, pre));
                    }
                    let hoist = lowered.iter().any(|(_, pre)| !pre.is_empty());
                    for (i, (k, ((x, kt), pre))) in elements.iter().zip(lowered).enumerate() {
                        let x = if hoist {
                            let w = x.width();
                            if w == 0 || w > ir::MAX_WIDTH {
                                return err(k.expr.span, format!("a table key with side effects of type {kt} cannot be computed before the lookup"));
                            }
                            let tmp = self.alloc_scalar(w);
                            key_prelude.extend(pre);
                            key_prelude.push(ir::Stmt::Assign {
                                dst: ir::LValue::Static(tmp),
                                src: x,
                            });
                            ir::Expr::Load(ir::LValue::Static(tmp))
                        } else {
                            x
                        };
                        let kind = match k.match_kind.name.as_str() {
                            "exact" => ir::MatchKind::Exact,
                            "ternary" => ir::MatchKind::Ternary,
                            "lpm" => ir::MatchKind::Lpm,
                            "range" => ir::MatchKind::Range,
                            "optional" => ir::MatchKind::Optional,
                            "selector" => ir::MatchKind::Selector,
                            other => {
                                return err(
                                    k.match_kind.span,
                                    format!("unknown match kind `{other}`"),
                                )
                            }
                        };
                        let kname = annotation_str(&k.annos, "name")
                            .unwrap_or_else(|| self.source_text(k.expr.span));
                        let width = x.width();
                        self.note_type(&kt);
                        let kid = annotation_ints(&k.annos, "id")
                            .and_then(|v| v.first().copied())
                            .map(|x| x as u32)
                            .unwrap_or(i as u32 + 1);
                        self.note_annos(format!("key {name} {kid}"), &k.annos)?;
                        if let Some(n) = self.key_new_type(scope, &k.expr) {
                            self.note_new_type(format!("key {name} {kid}"), &n);
                        }
                        table.keys.push(ir::TableKey {
                            name: kname,
                            id: kid,
                            expr: x,
                            kind,
                            width,
                        });
                    }
                }
                ast::TableProp::Actions { actions, .. } => {
                    for a in actions {
                        let (aname, idx, args, decl) = self.action_ref(scope, &a.expr)?;
                        let ndir = decl.params.iter().take_while(|p| p.dir.is_some()).count();
                        if args.len() > ndir {
                            return err(a.expr.span, "binding control-plane parameters in the actions list is not supported");
                        }
                        table.actions.push(ir::TableAction {
                            action: idx,
                            default_only: has_annotation(&a.annos, "defaultonly"),
                            table_only: has_annotation(&a.annos, "tableonly"),
                        });
                        let aid = self.actions[idx as usize].id;
                        self.note_annos(format!("ref {name} {aid}"), &a.annos)?;
                        names.push((aname, idx));
                    }
                }
                ast::TableProp::DefaultAction {
                    is_const, action, ..
                } => {
                    default_expr = Some(action.clone());
                    table.default_is_const = *is_const;
                }
                ast::TableProp::Entries {
                    is_const,
                    entries: es,
                    ..
                } => {
                    entries = Some(es.clone());
                    table.entries_are_const = *is_const;
                }
                ast::TableProp::Other {
                    name: pn,
                    value,
                    annos,
                    ..
                } => match pn.name.as_str() {
                    "size" => table.size = self.const_width(scope, value)?,
                    "support_timeout" => {
                        table.support_timeout = match &value.kind {
                            ExprKind::Bool(b) => *b,
                            _ => return err(value.span, "support_timeout must be true or false"),
                        }
                    }
                    "implementation" => {
                        let inst = self.table_extern(scope, value, annos)?;
                        match &*inst {
                            Instance::Extern {
                                kind: ExternKind::ActionProfile,
                                id,
                                ..
                            } => table.implementation = ir::Implementation::ActionProfile(*id),
                            Instance::Extern {
                                kind: ExternKind::ActionSelector,
                                id,
                                ..
                            } => table.implementation = ir::Implementation::ActionSelector(*id),
                            _ => {
                                return err(
                                    value.span,
                                    "implementation must be an action_profile or action_selector",
                                )
                            }
                        }
                    }
                    "counters" => match &*self.table_extern(scope, value, annos)? {
                        Instance::Extern {
                            kind: ExternKind::DirectCounter,
                            id,
                            ..
                        } => table.direct_counter = Some(*id),
                        _ => return err(value.span, "counters must be a direct_counter"),
                    },
                    "meters" => match &*self.table_extern(scope, value, annos)? {
                        Instance::Extern {
                            kind: ExternKind::DirectMeter,
                            id,
                            ..
                        } => table.direct_meter = Some(*id),
                        _ => return err(value.span, "meters must be a direct_meter"),
                    },
                    _ => {}
                },
            }
        }
        let tidx = self.tables.len() as u32;
        // default action
        table.default_action = match &default_expr {
            Some(e) => self.action_call(scope, e, &table, &names)?,
            None => {
                let na = self.no_action_index(t.name.span)?;
                if !table.actions.iter().any(|a| a.action == na) {
                    // the reference compiler adds the implicit default NoAction as a default-only
                    // action
                    table.actions.push(ir::TableAction {
                        action: na,
                        default_only: true,
                        table_only: false,
                    });
                    let aid = self.actions[na as usize].id;
                    self.p4meta
                        .annos
                        .entry(format!("ref {name} {aid}"))
                        .or_default()
                        .annotations
                        .push("@defaultonly".into());
                    names.push(("NoAction".to_string(), na));
                }
                ir::ActionCall {
                    action: na,
                    args: vec![],
                }
            }
        };
        if let Some(es) = entries {
            let n = es.len() as i32;
            for (i, e) in es.iter().enumerate() {
                // `(a, b)`, `{a, b}`; also `{a}` / `(a)` for a one-key table
                let keys: Vec<&ast::Expr> = match &e.keyset.kind {
                    ExprKind::List(items) => items.iter().collect(),
                    _ => vec![&e.keyset],
                };
                if keys.len() != table.keys.len() {
                    return err(
                        e.keyset.span,
                        format!(
                            "entry has {} keys, table `{name}` has {}",
                            keys.len(),
                            table.keys.len()
                        ),
                    );
                }
                let mut matches = vec![];
                for (k, ke) in table.keys.clone().iter().zip(keys) {
                    matches.push(self.entry_match(scope, ke, k)?);
                }
                let action = self.action_call(scope, &e.action, &table, &names)?;
                let priority = if let Some(p) =
                    annotation_ints(&e.annos, "priority").and_then(|v| v.first().copied())
                {
                    -(p as i32)
                } else if let Some(p) = &e.priority {
                    self.const_int(scope, p)?.to_i32().unwrap_or(0)
                } else {
                    -(i as i32 + 1).min(n)
                };
                table.entries.push(ir::TableEntry {
                    matches,
                    action,
                    priority,
                });
            }
        }
        if let Some(c) = table.direct_counter {
            self.direct_counters[c as usize].table = Some(tidx);
        }
        if let Some(m) = table.direct_meter {
            self.direct_meters[m as usize].table = Some(tidx);
        }
        if let ir::Implementation::ActionProfile(p) | ir::Implementation::ActionSelector(p) =
            table.implementation
        {
            self.action_profiles[p as usize].tables.push(tidx);
        }
        self.tables.push(table);
        Ok(Rc::new(TableInfo {
            id: tidx,
            actions: names,
            key_prelude,
        }))
    }

    pub(super) fn no_action_index(&mut self, span: Span) -> PResult<u32> {
        if let Some(i) = self.no_action {
            return Ok(i);
        }
        let g = self.global.clone();
        match g.lookup("NoAction") {
            Some(Binding::Action(decl, s)) => {
                let saved = std::mem::take(&mut self.path);
                let r = self.table_action(&decl, &s, span);
                self.path = saved;
                let i = r?;
                self.no_action = Some(i);
                Ok(i)
            }
            _ => err(
                span,
                "the table has no default_action and NoAction is not declared (include core.p4)",
            ),
        }
    }

    pub(super) fn table_extern(
        &mut self,
        scope: &Rc<Scope>,
        value: &ast::Expr,
        annos: &ast::Annotations,
    ) -> PResult<Rc<Instance>> {
        match &value.kind {
            ExprKind::Name(n) => match scope.lookup(&n.name) {
                Some(Binding::Instance(i)) => Ok(i),
                _ => err(
                    value.span,
                    format!("`{}` is not an extern instance", n.name),
                ),
            },
            _ => {
                // `@name("x") counters = direct_counter(...)`: the reference compiler names the
                // instance `x`, not qualified by the enclosing control
                let saved = annotation_str(annos, "name").map(|_| std::mem::take(&mut self.path));
                let r = self.ctor_arg_annos(scope, value, annos);
                if let Some(p) = saved {
                    self.path = p;
                }
                match r? {
                    Val::Binding(Binding::Instance(i)) => Ok(i),
                    _ => err(value.span, "expected an extern instantiation"),
                }
            }
        }
    }

    pub(super) fn entry_match(
        &mut self,
        scope: &Rc<Scope>,
        e: &ast::Expr,
        k: &ir::TableKey,
    ) -> PResult<ir::FieldMatch> {
        let t = Ty::Bit(k.width);
        let w = k.width;
        let full = || to_value(&((BigInt::from(1) << w) - 1), w);
        Ok(match (&e.kind, k.kind) {
            (ExprKind::Default | ExprKind::DontCare, ir::MatchKind::Exact) => {
                return err(e.span, "an exact key cannot be a wildcard")
            }
            (ExprKind::Default | ExprKind::DontCare, _) => ir::FieldMatch::Any,
            (ExprKind::Mask(v, m), ir::MatchKind::Ternary) => {
                let value = self.const_of(scope, v, &t)?;
                let mask = self.const_of(scope, m, &t)?;
                let value = ir::Value {
                    width: w,
                    words: value
                        .words
                        .iter()
                        .zip(mask.words.iter())
                        .map(|(a, b)| a & b)
                        .collect(),
                };
                ir::FieldMatch::Ternary { value, mask }
            }
            (ExprKind::Mask(v, m), ir::MatchKind::Lpm) => {
                let value = self.const_of(scope, v, &t)?;
                let mask = self.const_of(scope, m, &t)?;
                let ones: u32 = mask.words.iter().map(|x| x.count_ones()).sum();
                ir::FieldMatch::Lpm {
                    value,
                    prefix_len: ones,
                }
            }
            (ExprKind::Range(lo, hi), ir::MatchKind::Range) => ir::FieldMatch::Range {
                lo: self.const_of(scope, lo, &t)?,
                hi: self.const_of(scope, hi, &t)?,
            },
            (_, ir::MatchKind::Exact | ir::MatchKind::Selector) => {
                ir::FieldMatch::Exact(self.const_of(scope, e, &t)?)
            }
            (_, ir::MatchKind::Ternary) => ir::FieldMatch::Ternary {
                value: self.const_of(scope, e, &t)?,
                mask: full(),
            },
            (_, ir::MatchKind::Lpm) => ir::FieldMatch::Lpm {
                value: self.const_of(scope, e, &t)?,
                prefix_len: w,
            },
            (_, ir::MatchKind::Range) => {
                let v = self.const_of(scope, e, &t)?;
                ir::FieldMatch::Range {
                    lo: v.clone(),
                    hi: v,
                }
            }
            (_, ir::MatchKind::Optional) => {
                ir::FieldMatch::Optional(Some(self.const_of(scope, e, &t)?))
            }
        })
    }

    /// The source text of a span with whitespace removed (p4c's key names).
    pub fn source_text(&self, span: Span) -> String {
        let s: String = self
            .text
            .get(span.lo as usize..span.hi as usize)
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        // the reference compiler names validity keys `x.$valid$`
        s.replace(".isValid()", ".$valid$")
    }
}

impl<'t> Lowerer<'t> {
    /// The new type of a key expression: a cast to a new type, a variable or a field `base.f`
    /// declared with one.
    pub fn key_new_type(&mut self, scope: &Rc<Scope>, e: &ast::Expr) -> Option<String> {
        if let ast::ExprKind::Cast(t, _) = &e.kind {
            return self.new_type_name(t);
        }
        if let ast::ExprKind::Name(_) = &e.kind {
            let (v, _) = self.capture(|l| l.expr(scope, e, None)).ok()?;
            return match v {
                Val::Place(Place::Scalar(ir::LValue::Static(l), _)) => {
                    self.var_new_types.get(&l.slot).cloned()
                }
                _ => None,
            };
        }
        let ast::ExprKind::Member(base, f) = &e.kind else {
            return None;
        };
        let (v, _) = self.capture(|l| l.expr(scope, base, None)).ok()?;
        let Val::Place(p) = v else { return None };
        match p.ty() {
            Ty::Agg(a) => a.fields.iter().find(|x| x.name == f.name)?.new_type.clone(),
            _ => None,
        }
    }
}
