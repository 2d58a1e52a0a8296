//! The P4Info the front end's program gives, for what the reference compiler writes beyond names
//! and ids: `@id`, annotations (free-form and structured), new types, serializable enums,
//! `@pkginfo`, OPTIONAL keys, initial default actions, and the objects it leaves out (unapplied
//! tables, `@hidden`, actions called only from actions). Also direct type invocation and line
//! markers, which the production programs use.

/// The program's P4Info in the text format, as `p4sec compile` writes it.
fn p4info_text(p: &p4sec_ir::Program) -> String {
    use p4sec_p4runtime::prost_message::Message;
    let bytes = p4sec_p4runtime::p4info::p4info(p).encode_to_vec();
    p4sec_p4runtime::text::to_text("p4.config.v1.P4Info", &bytes).expect("a P4Info")
}

const SRC: &str = r#"
#include <core.p4>
#include <v1model.p4>
type bit<9> port_t;
enum bit<8> color_t { RED = 1, GREEN = 2 }
enum bit<4> unused_t { A = 1 }
header h_t { bit<8> a; port_t p; }
struct hs { h_t h; }
struct m { }
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control Sub(inout hs hdr) {
    @hidden action secret() { hdr.h.a = 7; }
    action inner(bit<8> v) { hdr.h.a = v; }
    action outer() { inner(3); }
    @id(0x01000077) @sai_action(SAI_X , 2) action set(@id(5) @refers_to(t , k) port_t port, color_t c) { hdr.h.p = port; }
    @id(0x02000042) @entry_restriction("
      // a comment inside the string
      k != 0;
    ") table t {
        key = { hdr.h.a : exact @id(3) @name("k") @SaiVal[name="kk", bits=8, on=true]; hdr.h.p : optional @name("p"); }
        actions = { set; @defaultonly NoAction; }
        default_action = NoAction();
    }
    table never { key = { hdr.h.a : exact; } actions = { NoAction; } }
    apply { t.apply(); secret(); outer(); }
}
control VC(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { Sub.apply(hdr); } }
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control CC(inout hs hdr, inout m meta) { apply { } }
control D(packet_out pk, in hs hdr) { apply { pk.emit(hdr.h); } }
# 100 "other.p4"
@pkginfo(name="demo.p4", version="1.2") V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#;

fn p4info() -> String {
    let prog = p4sec_frontend::compile_str("t.p4", SRC, &Default::default())
        .unwrap_or_else(|e| panic!("{}", e.messages.join("\n")));
    p4info_text(&prog)
}

#[test]
fn ids_annotations_and_types() {
    let t = p4info();
    // the direct invocation `Sub.apply` names the instance after the type
    assert!(t.contains("name: \"I.Sub.t\""), "{t}");
    assert!(t.contains("id: 33554498\n"), "table @id(0x02000042):\n{t}");
    assert!(t.contains("id: 16777335\n"), "action @id(0x01000077):\n{t}");
    assert!(t.contains("    id: 3\n    name: \"k\""), "key @id(3):\n{t}");
    assert!(t.contains("match_type: OPTIONAL"), "{t}");
    assert!(t.contains("annotations: \"@entry_restriction(\\\"\\n      // a comment inside the string\\n      k != 0;\\n    \\\")\""), "{t}");
    assert!(t.contains("annotations: \"@sai_action(SAI_X , 2)\""), "{t}");
    assert!(t.contains("annotations: \"@refers_to(t , k)\""), "{t}");
    assert!(t.contains("annotations: \"@defaultonly\""), "{t}");
    assert!(
        t.contains("key: \"bits\"\n          value {\n            int64_value: 8"),
        "{t}"
    );
    assert!(t.contains("bool_value: true"), "{t}");
    assert!(!t.contains("@id("), "@id is an id, not an annotation:\n{t}");
    // new type and serializable enum used by a parameter; the unused enum is not written
    // fields in number order, as protobuf's text format (and p4c) writes them
    assert!(t.contains("    id: 5\n    name: \"port\"\n    annotations: \"@refers_to(t , k)\"\n    bitwidth: 9\n    type_name {\n      name: \"port_t\""), "{t}");
    assert!(t.contains("key: \"port_t\""), "{t}");
    assert!(t.contains("key: \"color_t\""), "{t}");
    assert!(!t.contains("unused_t"), "{t}");
    assert!(
        t.contains("name: \"demo.p4\"") && t.contains("version: \"1.2\""),
        "{t}"
    );
    assert!(
        t.contains("initial_default_action {\n    action_id: 21257015"),
        "{t}"
    );
}

#[test]
fn left_out_objects() {
    let t = p4info();
    assert!(!t.contains("never"), "an unapplied table:\n{t}");
    assert!(!t.contains("secret"), "a @hidden action:\n{t}");
    assert!(
        !t.contains("\"I.Sub.inner\""),
        "an action called only from an action:\n{t}"
    );
    assert!(
        t.contains("\"I.Sub.outer\""),
        "an action called from the apply block:\n{t}"
    );
}

#[test]
fn line_markers_name_the_origin_in_errors() {
    let src = "#include <core.p4>\n# 40 \"lib/x.p4\"\nconst bit<8> a = nope;\n";
    let e = p4sec_frontend::compile_str("t.p4", src, &Default::default()).unwrap_err();
    assert!(e.messages[0].contains("lib/x.p4:40:"), "{}", e.messages[0]);
}
