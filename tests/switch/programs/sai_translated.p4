// sai_translated.p4: a SAI P4-style program whose port and next-hop ids are P4Runtime-translated strings
// (tests/switch/test_type_translation.py). A PacketOut enters the pipeline as if received on the port its
// `ingress_port` names; IPv4 packets are routed (LPM on the destination -> a next-hop id), the next hop gives
// the egress port, and every packet comes back to the controller as a PacketIn naming the port it came in on
// and the port it would leave by (0 when it was not routed).
#include <core.p4>
#include <v1model.p4>

@p4runtime_translation("", string)
type bit<9> port_id_t;
@p4runtime_translation("", string)
type bit<10> nexthop_id_t;

@controller_header("packet_out")
header packet_out_t {
    port_id_t ingress_port;
    bit<7>    pad;
}

@controller_header("packet_in")
header packet_in_t {
    port_id_t ingress_port;
    port_id_t target_egress_port;
    bit<6>    pad;
}

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
}

struct metadata_t {
    port_id_t    ingress_port;
    nexthop_id_t nexthop_id;
    port_id_t    egress_port;
}

parser SaiParser(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            255: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control SaiVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SaiIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action set_nexthop_id(nexthop_id_t nexthop_id) {
        meta.nexthop_id = nexthop_id;
    }
    action set_port(port_id_t port) {
        meta.egress_port = port;
    }
    action drop() {
        mark_to_drop(sm);
    }
    action no_action() { }

    table ipv4_table {
        key = {
            hdr.ipv4.dst_addr : lpm @name("ipv4_dst");
        }
        actions = { set_nexthop_id; drop; @defaultonly no_action; }
        const default_action = no_action;
        size = 1024;
    }

    table nexthop_table {
        key = {
            meta.nexthop_id : exact @name("nexthop_id");
        }
        actions = { set_port; @defaultonly no_action; }
        const default_action = no_action;
        size = 2048;
    }

    table ingress_acl {
        key = {
            meta.ingress_port : optional @name("in_port");
        }
        actions = { drop; @defaultonly no_action; }
        const default_action = no_action;
        size = 64;
    }

    apply {
        meta.ingress_port = (port_id_t)sm.ingress_port;
        if (hdr.packet_out.isValid()) {
            meta.ingress_port = hdr.packet_out.ingress_port;
            hdr.packet_out.setInvalid();
        }
        ingress_acl.apply();
        if (hdr.ipv4.isValid()) {
            if (ipv4_table.apply().hit) {
                nexthop_table.apply();
            }
        }
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = meta.ingress_port;
        hdr.packet_in.target_egress_port = meta.egress_port;
        sm.egress_spec = 255;
    }
}

control SaiEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { }
}

control SaiCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SaiDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(SaiParser(), SaiVerify(), SaiIngress(), SaiEgress(), SaiCompute(), SaiDeparser()) main;
