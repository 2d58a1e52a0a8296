//! [`clone_by_fields!`]: `Clone` for a struct whose copy is its fields' copies, with a
//! `clone_from` that copies each field through the field's own `clone_from` (a table version made
//! in a replaced one reuses its buffers: no allocation, no fresh pages).

/// `impl Clone` for struct `$t` of the fields listed: `clone` clones each, `clone_from` calls each
/// field's `clone_from`. Both destructure the struct, so a field added to it and not to the list
/// does not compile.
macro_rules! clone_by_fields {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Clone for $t {
            fn clone(&self) -> Self {
                let $t { $($f),* } = self;
                $t { $($f: $f.clone()),* }
            }

            fn clone_from(&mut self, src: &Self) {
                let $t { $($f),* } = self;
                $($f.clone_from(&src.$f);)*
            }
        }
    };
}

pub(super) use clone_by_fields;

#[cfg(test)]
mod tests {
    /// A struct of a buffer and a word.
    #[derive(Debug, PartialEq)]
    struct Two {
        buf: Vec<u64>,
        n: u32,
    }
    super::clone_by_fields!(Two { buf, n });

    /// `clone` copies every field, and `clone_from` copies them into the target's own buffer
    /// (its allocation kept when it is large enough).
    #[test]
    fn clones_every_field_and_reuses_buffers() {
        let a = Two {
            buf: vec![1, 2, 3],
            n: 7,
        };
        assert_eq!(a.clone(), a);
        let mut b = Two {
            buf: Vec::with_capacity(16),
            n: 0,
        };
        let before = b.buf.as_ptr();
        b.clone_from(&a);
        assert_eq!(b, a);
        assert_eq!(b.buf.as_ptr(), before, "the target's buffer reused");
    }
}
