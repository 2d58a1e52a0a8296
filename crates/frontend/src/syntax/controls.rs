//! Parsing control declarations' bodies: local declarations and the `apply` block.

use super::*;

impl Parser {
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
}
