//! Parsing table declarations: keys, `actions`, `default_action`, const and non-const `entries`
//! and the other properties.

use super::*;

impl Parser {
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
}
