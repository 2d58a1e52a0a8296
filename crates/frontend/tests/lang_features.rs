//! Language features of issue 21 checked at the front end: free-form annotation bodies (any tokens),
//! structured annotations folded to constants in the P4Info, nested slices as assignment targets, value sets
//! of nested structs, extern-typed locals; and the located refusals where a program is wrong.

fn compile(src: &str) -> Result<String, String> {
    p4sec_frontend::compile_str("t.p4", src, &Default::default()).map(|p| p4sec_ir::p4info::to_text(&p)).map_err(|e| e.messages.join("\n"))
}

/// A v1model program with `decls` at top level and `ing` in the ingress control (before `apply`), `body` in
/// its apply block; header `h` has fields `op`, `a` (bit<8>) and `w` (bit<16>).
fn program(decls: &str, ing: &str, body: &str) -> String {
    format!(
        r#"#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> op; bit<8> a; bit<16> w; }}
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

fn refused(src: &str) -> String {
    match compile(src) {
        Ok(_) => panic!("compiled, but should have been refused:\n{src}"),
        Err(e) => e,
    }
}

#[test]
fn annotations_free_form_and_structured() {
    let t = compile(include_str!("../../../tests/stf/lang-annotations.p4")).unwrap_or_else(|e| panic!("{e}"));
    // free-form: the tokens as the reference compiler writes them, apostrophe included
    assert!(t.contains("annotations: \"@comment(don ' t ( nest ) me ')\""), "{t}");
    // structured: every expression folded to its constant (1 == 2 is false, 5 + BASE is 11, 2 * 3 is 6)
    let list = "expressions {\n          int64_value: 1\n        }\n        expressions {\n          string_value: \"text\"\n        }\n        expressions {\n          bool_value: true\n        }\n        expressions {\n          bool_value: false\n        }\n        expressions {\n          int64_value: 11\n        }\n        expressions {\n          int64_value: -3\n        }";
    assert!(t.contains(list), "{t}");
    assert!(t.contains("key: \"n\"\n          value {\n            int64_value: 6"), "{t}");
    assert!(t.contains("key: \"k\"\n          value {\n            int64_value: 6"), "{t}");
    assert!(t.contains("key: \"on\"\n          value {\n            bool_value: false"), "{t}");
    assert!(!t.contains("string_value: \"\""), "no expression is left empty:\n{t}");
}

#[test]
fn annotation_refusals_are_located() {
    // an apostrophe outside an annotation body is no P4 token
    let e = refused(&program("const bit<8> C = 1 ' 2;", "", ""));
    assert!(e.contains("t.p4:6:") && e.contains("unexpected character `'`"), "{e}");
    // a structured annotation's expression must be a constant
    let e = refused(&program("", "    @a[hdr.h.a] table t { actions = { NoAction; } }", "        t.apply();"));
    assert!(e.contains("t.p4:12:") && e.contains("structured annotation must be a compile-time"), "{e}");
    let e = refused(&program("", "    @a[k = 1, k = 2] table t { actions = { NoAction; } }", "        t.apply();"));
    assert!(e.contains("t.p4:12:") && e.contains("key `k` appears twice"), "{e}");
}
