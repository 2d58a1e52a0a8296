//! Language features of issue 21 checked at the front end: free-form annotation bodies (any
//! tokens), structured annotations folded to constants in the P4Info, nested slices as assignment
//! targets, value sets of nested structs, extern-typed locals; and the located refusals where a
//! program is wrong.

/// The program's P4Info in the text format, as `p4sec compile` writes it.
fn p4info_text(p: &p4sec_ir::Program) -> String {
    use p4sec_p4runtime::prost_message::Message;
    let bytes = p4sec_p4runtime::p4info::p4info(p).encode_to_vec();
    p4sec_p4runtime::text::to_text("p4.config.v1.P4Info", &bytes).expect("a P4Info")
}

fn compile(src: &str) -> Result<String, String> {
    p4sec_frontend::compile_str("t.p4", src, &Default::default())
        .map(|p| p4info_text(&p))
        .map_err(|e| e.messages.join("\n"))
}

mod common;

/// A v1model program with `decls` at top level and `ing` in the ingress control (before `apply`),
/// `body` in its apply block; header `h` has fields `op`, `a` (bit<8>) and `w` (bit<16>).
fn program(decls: &str, ing: &str, body: &str) -> String {
    common::program("bit<8> op; bit<8> a; bit<16> w;", decls, ing, body)
}

fn refused(src: &str) -> String {
    common::refused(compile(src), src)
}

#[test]
fn annotations_free_form_and_structured() {
    let t = compile(include_str!("../../../tests/stf/lang-annotations.p4"))
        .unwrap_or_else(|e| panic!("{e}"));
    // free-form: the tokens as the reference compiler writes them, apostrophe included (escaped,
    // as protobuf's text format escapes it)
    assert!(
        t.contains("annotations: \"@comment(don \\' t ( nest ) me \\')\""),
        "{t}"
    );
    // structured: every expression folded to its constant (1 == 2 is false, 5 + BASE is 11, 2 * 3
    // is 6)
    let list = "expressions {\n          int64_value: 1\n        }\n        expressions {\n          string_value: \"text\"\n        }\n        expressions {\n          bool_value: true\n        }\n        expressions {\n          bool_value: false\n        }\n        expressions {\n          int64_value: 11\n        }\n        expressions {\n          int64_value: -3\n        }";
    assert!(t.contains(list), "{t}");
    assert!(
        t.contains("key: \"n\"\n          value {\n            int64_value: 6"),
        "{t}"
    );
    assert!(
        t.contains("key: \"k\"\n          value {\n            int64_value: 6"),
        "{t}"
    );
    assert!(
        t.contains("key: \"on\"\n          value {\n            bool_value: false"),
        "{t}"
    );
    assert!(
        !t.contains("string_value: \"\""),
        "no expression is left empty:\n{t}"
    );
}

#[test]
fn annotation_refusals_are_located() {
    // an apostrophe outside an annotation body is no P4 token
    let e = refused(&program("const bit<8> C = 1 ' 2;", "", ""));
    assert!(
        e.contains("t.p4:6:") && e.contains("unexpected character `'`"),
        "{e}"
    );
    // a structured annotation's expression must be a constant
    let e = refused(&program(
        "",
        "    @a[hdr.h.a] table t { actions = { NoAction; } }",
        "        t.apply();",
    ));
    assert!(
        e.contains("t.p4:12:") && e.contains("structured annotation must be a compile-time"),
        "{e}"
    );
    let e = refused(&program(
        "",
        "    @a[k = 1, k = 2] table t { actions = { NoAction; } }",
        "        t.apply();",
    ));
    assert!(
        e.contains("t.p4:12:") && e.contains("key `k` appears twice"),
        "{e}"
    );
}

#[test]
fn nested_slices_are_assignment_targets() {
    let ok = program("", "", "        hdr.h.w[15:0][7:4] = 4w3;\n        hdr.h.w[11:4][3:0] |= 4w1;\n        hdr.h.a[7:0][7:4][1:0] = 2w2;");
    compile(&ok).unwrap_or_else(|e| panic!("{e}"));
    // bits [9:4] of an 8-bit slice: refused at the statement's line, naming both slices
    let e = refused(&program("", "", "        hdr.h.w[7:0][9:4] = 6w1;"));
    assert!(
        e.contains("t.p4:14:") && e.contains("slice [9:4] is outside the slice [7:0]"),
        "{e}"
    );
    let e = refused(&program(
        "",
        "",
        "        hdr.h.w[15:8][3:0] += 4w1;\n        hdr.h.a[7:0][8:1] = 8w1;",
    ));
    assert!(
        e.contains("t.p4:15:") && e.contains("slice [8:1] is outside the slice [7:0]"),
        "{e}"
    );
    // the outer slice itself outside the field
    let e = refused(&program("", "", "        hdr.h.a[9:0][3:0] = 4w1;"));
    assert!(
        e.contains("t.p4:14:") && e.contains("outside the 8 bits"),
        "{e}"
    );
}

#[test]
fn value_set_of_nested_structs() {
    let decls = "struct inner_t { bit<8> a; @match(ternary) bit<4> b; }\nstruct outer_t { bit<8> op; inner_t inr; }";
    let src = program(decls, "", "").replace(
        "state start { pk.extract(hdr.h); transition accept; }",
        "value_set<outer_t>(4) vs;\n    state start { pk.extract(hdr.h); transition select(hdr.h.op, hdr.h.a, hdr.h.w[3:0]) { vs: accept; default: accept; } }",
    );
    let t = compile(&src).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        t.contains("    name: \"P.vs\"\n    alias: \"vs\""),
        "named after its parser:\n{t}"
    );
    assert!(t.contains("  match {\n    id: 2\n    name: \"inr.a\"\n    bitwidth: 8\n    match_type: EXACT\n  }"), "{t}");
    assert!(t.contains("  match {\n    id: 3\n    name: \"inr.b\"\n    bitwidth: 4\n    match_type: TERNARY\n  }"), "{t}");
    // a select with as many keys as the struct has top-level fields does not fit its three leaves
    let bad = src.replace(
        "select(hdr.h.op, hdr.h.a, hdr.h.w[3:0])",
        "select(hdr.h.op, hdr.h.a)",
    );
    let e = refused(&bad);
    assert!(
        e.contains("value set `vs` has 3 elements, select has 2 keys"),
        "{e}"
    );
    // a header inside the element type is refused, naming the field
    let e = refused(&src.replace(
        "struct outer_t { bit<8> op; inner_t inr; }",
        "struct outer_t { bit<8> op; h_t inr; }",
    ));
    assert!(
        e.contains("value set `vs`: struct field `inr` must be"),
        "{e}"
    );
}

#[test]
fn extern_locals_and_misplaced_instantiations() {
    // locals of extern type among a control's and a parser's declarations, and at top level
    let src = program(
        "register<bit<8>>(4) gr;",
        "    counter(4, CounterType.packets) c;\n    register<bit<8>>(2) r;",
        "        c.count(0);\n        r.write(0, hdr.h.a);\n        gr.write(1, hdr.h.a);",
    )
    .replace("state start {", "Checksum16() ck;\n    state start {");
    compile(&src).unwrap_or_else(|e| panic!("{e}"));
    // an instantiation among statements: in an apply block, an action and a parser state
    let e = refused(&program(
        "",
        "",
        "        counter(4, CounterType.packets) c3;",
    ));
    assert!(
        e.contains("t.p4:14:") && e.contains("instantiation of `c3`") && e.contains("apply block"),
        "{e}"
    );
    let e = refused(&program("", "    action a() { Checksum16() k; }", ""));
    assert!(
        e.contains("t.p4:12:") && e.contains("instantiation of `k`"),
        "{e}"
    );
    let e =
        refused(&program("", "", "").replace("state start {", "state start { Checksum16() ck;"));
    assert!(
        e.contains("t.p4:8:") && e.contains("instantiation of `ck`"),
        "{e}"
    );
}
