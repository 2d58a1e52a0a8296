// Action profiles, action selectors, direct meters and digests over P4Runtime
// (tests/switch/test_p4runtime_profiles.py). Every frame comes back to the controller (CPU port 255) with
// a `result` header telling which actions ran: the selector table's member tag, the profile table's tag and
// the direct meter's color.
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_out") header packet_out_t { bit<9> egress_port; bit<7> pad; }
@controller_header("packet_in") header packet_in_t { bit<9> ingress_port; bit<7> pad; }
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header result_t { bit<8> sel_tag; bit<8> prof_tag; bit<8> color; }
struct hs { packet_out_t packet_out; packet_in_t packet_in; ethernet_t eth; result_t res; }
struct m { bit<32> color; }
struct learn_t { bit<48> src; bit<16> type; }

parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    state start { transition select(sm.ingress_port) { 255: cpu; default: eth; } }
    state cpu { p.extract(hdr.packet_out); transition eth; }
    state eth { p.extract(hdr.eth); p.extract(hdr.res); transition accept; }
}
control V(inout hs hdr, inout m meta) { apply { } }
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    direct_meter<bit<32>>(MeterType.packets) dm;
    // groups pick a member by a CRC-16 of the flow (the selector keys: source address and type)
    action_selector(HashAlgorithm.crc16, 32w64, 32w16) ecmp;
    action_profile(32w4) prof;
    action set_sel(bit<8> tag) { hdr.res.sel_tag = tag; }
    action set_prof(bit<8> tag) { hdr.res.prof_tag = tag; }
    action metered() { dm.read(meta.color); }
    table sel_t {
        key = { hdr.eth.dst : exact; hdr.eth.src : selector; hdr.eth.type : selector; }
        actions = { set_sel; NoAction; }
        implementation = ecmp;
        default_action = NoAction();
    }
    table prof_t {
        key = { hdr.eth.dst : exact; }
        actions = { set_prof; NoAction; }
        implementation = prof;
        default_action = NoAction();
    }
    table meter_t {
        key = { hdr.eth.type : exact; }
        actions = { metered; NoAction; }
        meters = dm;
        default_action = NoAction();
    }
    apply {
        meta.color = 0;
        sel_t.apply();
        prof_t.apply();
        meter_t.apply();
        hdr.res.color = (bit<8>)meta.color;
        if (hdr.packet_out.isValid()) { hdr.packet_out.setInvalid(); }
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = sm.ingress_port;
        sm.egress_spec = 255;
        digest<learn_t>(1, { hdr.eth.src, hdr.eth.type });
    }
}
control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs hdr) { apply { p.emit(hdr.packet_in); p.emit(hdr.eth); p.emit(hdr.res); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
