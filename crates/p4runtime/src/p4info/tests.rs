//! Tests of the P4Info builder.
use prost::Message;

/// Map fields (serializable enums, new types) are written in key order: the same program gives
/// the same bytes however many entries the maps hold and whatever order they were filled in.
#[test]
fn the_same_program_gives_the_same_bytes() {
    let mut src = String::from("#include <core.p4>\n#include <v1model.p4>\n");
    for i in 0..12 {
        src.push_str(&format!(
            "enum bit<8> E{i} {{ A = 1, B = 2 }}\ntype bit<{w}> T{i}_t;\n",
            w = 8 + i
        ));
    }
    src.push_str("header h_t { bit<8> f; }\nstruct H { h_t h; }\nstruct M {\n");
    for i in 0..12 {
        src.push_str(&format!("    E{i} e{i};\n    T{i}_t t{i};\n"));
    }
    // an action whose parameters are of every enum and new type: all of them in the P4Info
    let params: Vec<String> = (0..12).map(|i| format!("E{i} e{i}, T{i}_t t{i}")).collect();
    let body: String = (0..12)
        .map(|i| format!("m.e{i} = e{i}; m.t{i} = t{i}; "))
        .collect();
    src.push_str(&format!(
        "}}\nparser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) {{\n\
         state start {{ p.extract(h.h); transition accept; }} }}\n\
         control C(inout H h, inout M m) {{ apply {{}} }}\n\
         control I(inout H h, inout M m, inout standard_metadata_t s) {{\n\
         action a({}) {{ {body} }}\n\
         table tb {{ key = {{ m.e3 : exact; m.t4 : exact; }} actions = {{ a; }} }}\n\
         apply {{ tb.apply(); }} }}\n\
         control E(inout H h, inout M m, inout standard_metadata_t s) {{ apply {{}} }}\n\
         control D(packet_out p, in H h) {{ apply {{ p.emit(h.h); }} }}\n\
         V1Switch(P(), C(), I(), E(), C(), D()) main;\n",
        params.join(", ")
    ));
    let prog = p4sec_frontend::compile_str("maps.p4", &src, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let first = super::p4info(&prog);
    let ti = first.type_info.as_ref().expect("type info");
    assert!(
        ti.serializable_enums.len() == 12 && ti.new_types.len() == 12,
        "the program's enums and new types are in the P4Info: {ti:?}"
    );
    let bytes = first.encode_to_vec();
    for _ in 0..8 {
        assert_eq!(super::p4info(&prog).encode_to_vec(), bytes);
    }
}
