//! Front-end checks of generic arrays (P4_16 1.2.5: `bit<8> arr[16]` header and struct fields,
//! `T[N]` locals, `[L +: W]` slices) and of default parameter values: what compiles, and the
//! located refusals.

fn compile(src: &str) -> Result<p4sec_ir::Program, String> {
    p4sec_frontend::compile_str("t.p4", src, &Default::default()).map_err(|e| e.messages.join("\n"))
}

mod common;
use common::program;

fn refused(src: &str) -> String {
    common::refused(compile(src), src)
}

#[test]
fn array_fields_are_laid_out_element_by_element() {
    let p = compile(&program(
        "bit<8> k; bit<4> nib[3]; bit<4> pad; bit<8> arr[2][2];",
        "",
        "",
        "",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let h = &p.headers[0];
    let names: Vec<&str> = h.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "k",
            "nib[0]",
            "nib[1]",
            "nib[2]",
            "pad",
            "arr[0][0]",
            "arr[0][1]",
            "arr[1][0]",
            "arr[1][1]"
        ]
    );
    let widths: Vec<u32> = h.fields.iter().map(|f| f.loc.width).collect();
    assert_eq!(widths, [8, 4, 4, 4, 4, 8, 8, 8, 8]);
    assert_eq!(h.max_bits, 8 + 16 + 32);
}

#[test]
fn array_refusals_name_the_construct() {
    let e = refused(&program(
        "bit<8> arr[4];",
        "",
        "",
        "hdr.h.arr.push_front(1);",
    ));
    assert!(
        e.contains("t.p4:14:") && e.contains("`push_front` is a member of header stacks only"),
        "{e}"
    );
    let e = refused(&program("bit<8> arr[4];", "", "", "hdr.h.arr[4] = 1;"));
    assert!(e.contains("index 4 is out of bounds"), "{e}");
    let e = refused(&program("bit<8> arr[0];", "", "", ""));
    assert!(e.contains("array size 0 is out of range"), "{e}");
    let e = refused(&program("varbit<8> v[2];", "", "", ""));
    assert!(e.contains("t.p4:3:"), "{e}");
    // the elements of an array of structs holding headers are not headers of a stack: a run-time
    // index is refused (their validity could not be set through it), a constant one works
    let decls = "header e_t { bit<8> v; } struct s_t { e_t e; bit<8> x; }";
    let e = refused(&program(
        "bit<8> k;",
        decls,
        "s_t[2] loc;",
        "loc[hdr.h.k].e.setValid();",
    ));
    assert!(
        e.contains("t.p4:14:") && e.contains("array of s_t (its elements hold headers)"),
        "{e}"
    );
    compile(&program(
        "bit<8> k;",
        decls,
        "s_t[2] loc;",
        "loc[1].e.setValid(); loc[1].x = hdr.h.k;",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn indexed_slices() {
    // `x[L +: W]` is x[L+W-1 : L] and `x[H -: W]` is x[H : H-W+1]: both forms are accepted and an
    // out-of-range one is refused with the slice's bounds
    compile(&program(
        "bit<8> k; bit<8> a;",
        "",
        "",
        "hdr.h.a = hdr.h.k[4 +: 4] ++ hdr.h.k[7 -: 4]; hdr.h.k[2 +: 3] = 1;",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let e = refused(&program("bit<8> k;", "", "", "hdr.h.k[6 +: 4] = 1;"));
    assert!(e.contains("[9:6]"), "{e}");
}

#[test]
fn register_element_types() {
    // typedefs, new types and int<W> compile; a struct is refused at the declaration, naming the
    // type
    let ok = "typedef bit<16> v_t; typedef v_t v2_t; type bit<8> t_t;";
    compile(&program(
        "bit<8> k;",
        ok,
        "register<v2_t>(4) r1; register<t_t>(4) r2; register<int<8>>(4) r3;",
        "int<8> z; r3.read(z, 0); r3.write(1, z - 1);",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let e = refused(&program(
        "bit<8> k;",
        "struct pair_t { bit<8> a; bit<8> b; }",
        "register<pair_t>(4) r;",
        "",
    ));
    assert!(
        e.contains("t.p4:12:")
            && e.contains("element type of a v1model register")
            && e.contains("pair_t"),
        "{e}"
    );
    // a value of another type is refused
    let e = refused(&program(
        "bit<8> k;",
        "",
        "register<int<8>>(4) r;",
        "r.write(0, 16w1);",
    ));
    assert!(e.contains("t.p4:14:") && e.contains("type mismatch"), "{e}");
}
