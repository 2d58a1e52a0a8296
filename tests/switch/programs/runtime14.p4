// P4Runtime 1.4 features (tests/switch/test_p4runtime14.py): value sets of a struct (with @match kinds), of
// a tuple and of a one-field struct matched as LPM against select keys; an indexed meter and a direct meter
// whose per-colour counters are read; a table with idle timeouts (support_timeout). Every frame comes back
// to the controller (CPU port 255) with a `result` header telling what happened.
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_out") header packet_out_t { bit<9> egress_port; bit<7> pad; }
@controller_header("packet_in") header packet_in_t { bit<9> ingress_port; bit<7> pad; }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<8> proto; bit<16> port; }
header result_t { bit<8> vs; bit<8> color; bit<8> dcolor; bit<8> idle; }
struct hs { packet_out_t packet_out; packet_in_t packet_in; ethernet_t eth; tag_t tag; result_t res; }
struct m { bit<8> vs; bit<32> color; bit<32> dcolor; bit<8> idle; }

struct pair_t {
    @match(ternary) bit<8> proto;
    bit<16> port;
}
struct low_t { @match(lpm) bit<16> port; }

parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    value_set<pair_t>(4) pvs;
    value_set<tuple<bit<8>, bit<16>>>(2) tvs;
    value_set<low_t>(2) lvs;
    state start { meta.vs = 0; transition select(sm.ingress_port) { 255: cpu; default: eth; } }
    state cpu { p.extract(hdr.packet_out); transition eth; }
    state eth { p.extract(hdr.eth); p.extract(hdr.tag); p.extract(hdr.res); transition select(hdr.tag.proto, hdr.tag.port) { pvs: in_pvs; tvs: in_tvs; default: low; } }
    state low { transition select(hdr.tag.port) { lvs: in_lvs; default: accept; } }
    state in_pvs { meta.vs = 1; transition accept; }
    state in_tvs { meta.vs = 2; transition accept; }
    state in_lvs { meta.vs = 3; transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    meter(4, MeterType.packets) mtr;
    direct_meter<bit<32>>(MeterType.packets) dm;
    action metered() { dm.read(meta.dcolor); }
    action seen() { meta.idle = 1; }
    table meter_t {
        key = { hdr.eth.type : exact; }
        actions = { metered; NoAction; }
        meters = dm;
        default_action = NoAction();
    }
    table idle_t {
        key = { hdr.eth.dst : exact; }
        actions = { seen; NoAction; }
        support_timeout = true;
        default_action = NoAction();
    }
    apply {
        meta.color = 0;
        meta.dcolor = 0;
        meta.idle = 0;
        mtr.execute_meter((bit<32>)0, meta.color);
        meter_t.apply();
        idle_t.apply();
        hdr.res.vs = meta.vs;
        hdr.res.color = (bit<8>)meta.color;
        hdr.res.dcolor = (bit<8>)meta.dcolor;
        hdr.res.idle = meta.idle;
        if (hdr.packet_out.isValid()) { hdr.packet_out.setInvalid(); }
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = sm.ingress_port;
        sm.egress_spec = 255;
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.packet_in); p.emit(hdr.eth); p.emit(hdr.tag); p.emit(hdr.res); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
