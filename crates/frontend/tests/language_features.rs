//! Language features of issue 21 seen from the front end's output: the flattened layout of
//! struct-typed header fields, and the located refusals around them (the packet behaviour is in
//! tests/stf/lang-*.p4).

fn program(decls: &str, ingress: &str) -> String {
    format!(
        "#include <core.p4>\n#include <v1model.p4>\n{decls}\nstruct m {{ }}\n\
         parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{ state start {{ transition accept; }} }}\n\
         control C(inout hs hdr, inout m meta) {{ apply {{ }} }}\n\
         control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{\n{ingress}\n}}\n\
         control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr); }} }}\n\
         V1Switch(P(), C(), I(), E(), C(), D()) main;\n"
    )
}

fn compile(src: &str) -> Result<p4sec_ir::Program, String> {
    p4sec_frontend::compile_str("t.p4", src, &Default::default()).map_err(|e| e.messages.join("\n"))
}

#[test]
fn struct_fields_of_headers_are_flattened_in_declaration_order() {
    let src = program(
        "enum bit<8> K { A = 1 }\nstruct p_t { bit<4> hi; bit<4> lo; }\nstruct r_t { p_t p0; bool f; bit<7> port; p_t p1; }\n\
         header h_t { K kind; r_t row; bit<8> tail; }\nstruct hs { h_t h; }",
        "apply { }",
    );
    let prog = compile(&src).unwrap();
    let h = prog
        .headers
        .iter()
        .find(|h| h.name == "hdr.h")
        .expect("the header hdr.h");
    let names: Vec<(&str, u32)> = h
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.loc.width))
        .collect();
    assert_eq!(
        names,
        vec![
            ("kind", 8),
            ("row.p0.hi", 4),
            ("row.p0.lo", 4),
            ("row.f", 1),
            ("row.port", 7),
            ("row.p1.hi", 4),
            ("row.p1.lo", 4),
            ("tail", 8)
        ]
    );
    assert_eq!(h.max_bits, 40);
}

#[test]
fn header_fields_that_cannot_be_serialized_are_refused_with_their_place() {
    // a struct holding a header, a varbit inside a struct, a plain (non-serializable) enum
    for (decls, what) in [
        ("header in_t { bit<8> a; }\nstruct s_t { in_t x; }\nheader h_t { s_t s; }\nstruct hs { h_t h; }", "header field `s` cannot have type"),
        ("struct s_t { varbit<8> v; }\nheader h_t { s_t s; }\nstruct hs { h_t h; }", "header field `s` cannot have type"),
        ("enum E { X }\nheader h_t { E e; }\nstruct hs { h_t h; }", "header field `e` cannot have type"),
    ] {
        let e = compile(&program(decls, "apply { }")).unwrap_err();
        assert!(e.contains("t.p4:") && e.contains(what), "{decls}:\n{e}");
    }
}

#[test]
fn extern_parameters_take_one_instance_per_control_instance() {
    let decls = "header h_t { bit<8> a; }\nstruct hs { h_t h; }\n\
                 control Sub(inout hs hdr, register<bit<8>> r) { apply { r.write(0, hdr.h.a); } }";
    let ok = "register<bit<8>>(1) r1; Sub() s; apply { s.apply(hdr, r1); s.apply(hdr, r1); }";
    compile(&program(decls, ok)).unwrap();
    let two = "register<bit<8>>(1) r1; register<bit<8>>(1) r2; Sub() s; apply { s.apply(hdr, r1); s.apply(hdr, r2); }";
    let e = compile(&program(decls, two)).unwrap_err();
    assert!(
        e.contains("t.p4:") && e.contains("another extern instance for `r`"),
        "{e}"
    );
    let not_extern = "register<bit<8>>(1) r1; Sub() s; apply { s.apply(hdr, hdr.h.a); }";
    let e = compile(&program(decls, not_extern)).unwrap_err();
    assert!(
        e.contains("t.p4:") && e.contains("must be an extern instance"),
        "{e}"
    );
}

#[test]
fn casts_to_int_of_run_time_values_are_exact_and_others_refused() {
    let decls = "header h_t { bit<8> a; bool b; }\nstruct hs { h_t h; }";
    compile(&program(
        decls,
        "apply { hdr.h.a = (bit<8>)((int)hdr.h.a + 1); }",
    ))
    .unwrap();
    let e = compile(&program(
        decls,
        "apply { hdr.h.a = (bit<8>)((int)hdr.h.b); }",
    ))
    .unwrap_err();
    assert!(
        e.contains("t.p4:") && e.contains("cannot cast bool to int"),
        "{e}"
    );
}

/// Does any statement of the program's controls or parser states run a run-time loop?
fn has_runtime_loop(p: &p4sec_ir::Program) -> bool {
    fn any(b: &[p4sec_ir::Stmt]) -> bool {
        use p4sec_ir::Stmt;
        b.iter().any(|s| match s {
            Stmt::Loop { .. } => true,
            Stmt::If { then, else_, .. } => any(then) || any(else_),
            Stmt::Block { body, .. } => any(body),
            Stmt::Switch { cases, default, .. } => {
                cases.iter().any(|(_, c)| any(c)) || any(default)
            }
            _ => false,
        })
    }
    any(&p.ingress.body) || p.parser.states.iter().any(|s| any(&s.body))
}

#[test]
fn for_loops_unroll_when_they_can_and_run_at_run_time_otherwise() {
    let decls = "header h_t { bit<8> a; bit<8> b; }\nstruct hs { h_t h; }";
    let unrolled = "apply { for (bit<8> i = 0; i < 200; i = i + 1) { hdr.h.b = hdr.h.b + i; } for (bit<4> k in 0 .. 15) { if (k == 2) { break; } } }";
    assert!(!has_runtime_loop(
        &compile(&program(decls, unrolled)).unwrap()
    ));
    // a run-time condition whose body needs the variable as a constant (a slice): unrolled, the
    // condition tested before each iteration
    let sliced =
        "apply { for (bit<3> i = 0; i < hdr.h.a[2:0]; i = i + 1) { hdr.h.b[i:i] = 1w1; } }";
    assert!(!has_runtime_loop(
        &compile(&program(decls, sliced)).unwrap()
    ));
    // every compound assignment a statement takes is a loop update too (`/=` and `%=` included)
    for op in [
        "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^=", "|+|=", "|-|=",
    ] {
        let body = format!("apply {{ for (bit<8> i = 64; i > 1 && i < 200; i {op} 2) {{ hdr.h.b = hdr.h.b + 1; }} }}");
        compile(&program(decls, &body)).unwrap_or_else(|e| panic!("`{op}` as a loop update: {e}"));
    }
    // the loops unrolling cannot take run at run time
    for body in [
        "apply { for (bit<8> i = 0; i < hdr.h.a; i = i + 1) { hdr.h.b = hdr.h.b + i; } }",
        "apply { for (bit<16> i = 0; i < 60000; i = i + 1) { hdr.h.b = 1; } }",
        "apply { for (bit<8> i = hdr.h.a; i < 3; i = i + 1) { } }",
        "apply { for (bit<8> i = 0; i < 3; hdr.h.a = 1) { } }",
        "apply { for (bit<8> i = 0; ; i = i + 1) { if (i == hdr.h.a) { break; } } }",
        "apply { for (bit<8> i in 1 .. hdr.h.a) { } }",
        "apply { bit<8> i; for (i = 0; i < 3; i = i + 1) { } hdr.h.b = i; }",
        "apply { for (bit<8> i = 0; i < 8; i = i + 1) { i = i + 1; } }",
    ] {
        let p = compile(&program(decls, body)).unwrap_or_else(|e| panic!("{body}:\n{e}"));
        assert!(has_runtime_loop(&p), "{body}: no run-time loop");
    }
    // a loop variable the body writes, over constants: copies, still unrolled
    let copies = "apply { for (bit<8> x in {1, 2}) { x = x + 1; hdr.h.b = x; } }";
    assert!(!has_runtime_loop(
        &compile(&program(decls, copies)).unwrap()
    ));
    for (body, want) in [
        ("apply { break; }", "`break` outside of a `for` loop"),
        (
            "action a() { continue; } apply { for (bit<8> i in 1 .. 2) { a(); } }",
            "`continue` outside of a `for` loop",
        ),
        ("apply { for (bit<8> i = 0; i + 1; i = i + 1) { } }", "bool"),
        (
            "apply { for (bit<8> i = 0; i < 3; i = i + 1) { hdr.h.b = nope; } }",
            "nope",
        ),
        ("apply { for (x in 1 .. 2) { x = 3; } }", "give `x` a type"),
    ] {
        let e = compile(&program(decls, body)).unwrap_err();
        assert!(e.contains("t.p4:") && e.contains(want), "{body}:\n{e}");
    }
}

#[test]
fn default_initializers_and_field_list_names_refuse_what_they_cannot_resolve() {
    let decls = "header h_t { bit<8> a; bit<8> b; }\nstruct hs { h_t h; }";
    compile(&program(
        decls,
        "apply { h_t x = {...}; h_t y = { b = 2, ... }; hdr.h = { 1, ... }; }",
    ))
    .unwrap();
    let e = compile(&program(decls, "apply { hdr.h.a = {...}; }")).unwrap_err();
    assert!(
        e.contains("t.p4:")
            && e.contains("a `...` initializer needs a struct, header or tuple type"),
        "{e}"
    );
    let e = compile(&program(decls, "apply { h_t x = { 1, 2, 3, ... }; }")).unwrap_err();
    assert!(
        e.contains("t.p4:") && e.contains("initializer has 3 elements"),
        "{e}"
    );
    let fl = |ann: &str| {
        format!("header h_t {{ bit<8> a; }}\nstruct hs {{ h_t h; }}\nconst bit<8> FL = 2;\nstruct keep_t {{ {ann} bit<8> k; }}")
    };
    compile(&program(&fl("@field_list(FL, 1)"), "keep_t k; apply { }")).unwrap();
    let e = compile(&program(&fl("@field_list(NOPE)"), "apply { }")).unwrap_err();
    assert!(
        e.contains("t.p4:") && e.contains("`NOPE` is not declared"),
        "{e}"
    );
    let e = compile(&program(&fl("@field_list(hdr)"), "apply { }")).unwrap_err();
    assert!(
        e.contains("t.p4:")
            && (e.contains("is not declared") || e.contains("must be an integer constant")),
        "{e}"
    );
}

/// An unterminated `/*` comment or string literal is a located error, not the rest of the file
/// silently swallowed; a lone quote in a skipped `#if 0` branch is not one.
#[test]
fn unterminated_comments_and_string_literals_are_refused_with_their_place() {
    let decls = "header h_t { bit<8> a; bit<8> b; }\nstruct hs { h_t h; }";
    let ok = program(decls, "apply { }");
    let e = compile(&format!("{ok}/* never closed\nconst bit<8> X = 1;\n")).unwrap_err();
    assert!(
        e.contains("t.p4:14:1") && e.contains("unterminated comment"),
        "{e}"
    );
    let e = compile(&program(decls, "@name(\"open apply { }")).unwrap_err();
    assert!(
        e.contains("t.p4:9:7") && e.contains("unterminated string literal"),
        "{e}"
    );
    compile(&format!("#if 0\n\"lone\n#endif\n{ok}")).unwrap();
}
