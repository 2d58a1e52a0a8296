//! What the front-end test files share: a v1model program skeleton to put the construct under test
//! in, and the check that a program is refused.

#![allow(dead_code)]

/// A v1model program with `decls` at top level, header `h` with fields `hdr_fields`, `ing` among
/// the ingress control's locals and `body` in its apply block.
pub fn program(hdr_fields: &str, decls: &str, ing: &str, body: &str) -> String {
    format!(
        r#"#include <core.p4>
#include <v1model.p4>
header h_t {{ {hdr_fields} }}
struct hs {{ h_t h; }}
struct m {{ }}
{decls}
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.h); transition accept; }}
}}
control VC(inout hs hdr, inout m meta) {{ apply {{ }} }}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{
{ing}
    apply {{
{body}
    }}
}}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout hs hdr, inout m meta) {{ apply {{ }} }}
control D(packet_out pk, in hs hdr) {{ apply {{ pk.emit(hdr.h); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#
    )
}

/// The error of a compilation that must fail (`src`: the program, shown when it compiled).
pub fn refused<T>(r: Result<T, String>, src: &str) -> String {
    match r {
        Ok(_) => panic!("compiled, but should have been refused:\n{src}"),
        Err(e) => e,
    }
}
