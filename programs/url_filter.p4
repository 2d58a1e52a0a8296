/* url_filter.p4: URL filtering as DeeP4R does it, in plain v1model (no extern needed).
 *
 * A packet to inspect (TCP to port 80 or 443, UDP to port 53) gets an id; the ingress clones it (I2E) and
 * the clone becomes a SCANNER: it recirculates, consuming one payload byte per pass (the byte is parsed and
 * not emitted again), classifies it (table byte_class) and moves the automaton (table dfa: state, class ->
 * next state, blocked). The ORIGINAL recirculates with a label header until the decision register of its id
 * says PASS (label removed, forwarded unchanged) or BLOCK (dropped). The table supervisor drives the
 * original's life cycle from (decision). All tables are written by the control plane from
 * `p4sec-dpi` output.
 *
 * Counter ufr_stats: 0 passed after inspection, 1 blocked, 2 not inspected, 3 scanner passes,
 * 4 original waiting passes. */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_LABEL = 0x88B6;
const bit<8>  ROLE_ORIGINAL = 1;
const bit<8>  ROLE_SCANNER = 2;
const bit<8>  PENDING = 0;
const bit<8>  PASS = 1;
const bit<8>  BLOCK = 2;
const bit<32> SCAN_SESSION = 100;
#define IDS 1024

/* carried in front of the Ethernet header on recirculated copies only */
header label_t {
    bit<16> id;
    bit<8>  role;
    bit<8>  mode;       /* 0: text (HTTP, TLS), 1: DNS wire format */
    bit<16> skip;       /* payload bytes still to skip before scanning (TCP options, DNS header) */
    bit<32> state;
    bit<16> ether_type; /* the original EtherType */
}
header ethernet_t { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification; bit<3> flags;
    bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum; bit<32> src_addr; bit<32> dst_addr;
}
header tcp_t {
    bit<16> src_port; bit<16> dst_port; bit<32> seq_no; bit<32> ack_no; bit<4> data_offset; bit<4> res;
    bit<8> flags; bit<16> window; bit<16> checksum; bit<16> urgent_ptr;
}
header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }
header byte_t { bit<8> b; }

struct headers_t { label_t label; ethernet_t ethernet; ipv4_t ipv4; tcp_t tcp; udp_t udp; byte_t byte; }
struct meta_t {
    @field_list(1) bit<16> id;
    @field_list(1) bit<8>  mode;
    @field_list(1) bit<16> skip;
    bit<8>  cls;
    bit<32> next;
    bit<1>  blocked;
    bit<8>  decision;
    bit<16> next_id;
    bit<1>  inspect;
}

parser UfrParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.instance_type) {
            0: parse_ethernet;
            default: parse_label;
        }
    }
    state parse_label {
        pkt.extract(hdr.label);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 6): parse_tcp;
            (5, 0, 17): parse_udp;
            default: accept;
        }
    }
    state parse_tcp { pkt.extract(hdr.tcp); transition scan_byte; }
    state parse_udp { pkt.extract(hdr.udp); transition scan_byte; }
    /* a scanner takes the next payload byte off the packet */
    state scan_byte {
        transition select(hdr.label.isValid(), hdr.label.role) {
            (true, ROLE_SCANNER): take_byte;
            default: accept;
        }
    }
    state take_byte {
        pkt.extract(hdr.byte);
        transition accept;
    }
}

control UfrNoChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control UfrIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(IDS) decision;
    register<bit<16>>(1) next_id;
    counter(5, CounterType.packets) ufr_stats;

    action forward(bit<9> port) { sm.egress_spec = port; }
    action no_route() { mark_to_drop(sm); }
    table ufr_port {
        key = { sm.ingress_port : exact; }
        actions = { forward; no_route; }
        default_action = no_route();
        size = 512;
    }

    action set_class(bit<8> cls) { meta.cls = cls; }
    table byte_class {
        key = { hdr.label.mode : exact; hdr.byte.b : exact; }
        actions = { set_class; }
        default_action = set_class(0);
        size = 1024;
    }

    action step(bit<32> next, bit<1> blocked) { meta.next = next; meta.blocked = blocked; }
    action restart() { meta.next = 0; meta.blocked = 0; }
    table dfa {
        key = { hdr.label.state : exact; meta.cls : exact; }
        actions = { step; restart; }
        default_action = restart();
        size = 1048576;
    }

    /* the original's life cycle */
    action wait_for_verdict() { ufr_stats.count(4); }
    action release() {
        hdr.ethernet.ether_type = hdr.label.ether_type;
        hdr.label.setInvalid();
        ufr_stats.count(0);
    }
    action block() {
        mark_to_drop(sm);
        ufr_stats.count(1);
    }
    table supervisor {
        key = { meta.decision : exact; }
        actions = { wait_for_verdict; release; block; }
        const entries = {
            PENDING : wait_for_verdict();
            PASS : release();
            BLOCK : block();
        }
        default_action = block();
    }

    apply {
        if (!hdr.label.isValid()) {
            /* a fresh packet: inspect it or just forward it */
            if (hdr.tcp.isValid() && (hdr.tcp.dst_port == 80 || hdr.tcp.dst_port == 443)) {
                meta.inspect = 1;
                meta.mode = 0;
                meta.skip = ((bit<16>)hdr.tcp.data_offset - 5) * 4;
            } else if (hdr.udp.isValid() && hdr.udp.dst_port == 53) {
                meta.inspect = 1;
                meta.mode = 1;
                meta.skip = 12;
            }
            if (meta.inspect == 0) {
                ufr_stats.count(2);
                ufr_port.apply();
                return;
            }
            next_id.read(meta.next_id, 0);
            meta.id = meta.next_id;
            next_id.write(0, (meta.next_id + 1) % IDS);
            decision.write((bit<32>)meta.id, PENDING);
            clone_preserving_field_list(CloneType.I2E, SCAN_SESSION, 1);
            hdr.label.setValid();
            hdr.label.id = meta.id;
            hdr.label.role = ROLE_ORIGINAL;
            hdr.label.mode = meta.mode;
            hdr.label.ether_type = hdr.ethernet.ether_type;
            ufr_port.apply();
            return;
        }
        if (hdr.label.role == ROLE_ORIGINAL) {
            decision.read(meta.decision, (bit<32>)hdr.label.id);
            supervisor.apply();
            if (meta.decision != PENDING) {
                ufr_port.apply();
                if (meta.decision == BLOCK) {
                    mark_to_drop(sm);
                }
            }
            return;
        }
        /* the scanner: one byte (or the end of the payload) per pass */
        ufr_stats.count(3);
        if (hdr.byte.isValid()) {
            if (hdr.label.skip > 0) {
                hdr.label.skip = hdr.label.skip - 1;
                return;
            }
            byte_class.apply();
        } else {
            meta.cls = 0;   /* END */
        }
        dfa.apply();
        if (meta.blocked == 1) {
            decision.write((bit<32>)hdr.label.id, BLOCK);
            mark_to_drop(sm);
        } else if (!hdr.byte.isValid()) {
            decision.write((bit<32>)hdr.label.id, PASS);
            mark_to_drop(sm);
        } else {
            hdr.label.state = meta.next;
        }
    }
}

control UfrEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_start(bit<32> state) { hdr.label.state = state; }
    table dfa_start {
        key = { hdr.label.mode : exact; }
        actions = { set_start; }
        default_action = set_start(0);
        size = 4;
    }

    apply {
        if (sm.instance_type == 1) {
            /* the I2E clone becomes the scanner */
            hdr.label.setValid();
            hdr.label.id = meta.id;
            hdr.label.role = ROLE_SCANNER;
            hdr.label.mode = meta.mode;
            hdr.label.skip = meta.skip;
            hdr.label.ether_type = hdr.ethernet.ether_type;
            dfa_start.apply();
            recirculate_preserving_field_list(1);
        } else if (hdr.label.isValid()) {
            /* the original waits, the scanner goes on */
            recirculate_preserving_field_list(1);
        }
    }
}

control UfrDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.label);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.udp);
        /* hdr.byte is not emitted: the scanner's payload gets one byte shorter per pass */
    }
}

V1Switch(UfrParser(), UfrNoChecksum(), UfrIngress(), UfrEgress(), UfrNoChecksum(), UfrDeparser()) main;
