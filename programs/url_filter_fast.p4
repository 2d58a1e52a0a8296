/* url_filter_fast.p4: URL filtering with the single-pass variant of DeeP4R: the payload is scanned by the
 * dfa_matcher extern (an Aho-Corasick automaton compiled by `p4sec-dpi compile --automaton` and loaded over
 * P4Runtime), so the verdict is known in the same pipeline pass and nothing waits or recirculates.
 *
 * Inspected: TCP to port 80 (HTTP/1.x requests: the Host header), TCP to port 443 (TLS ClientHello: the
 * server name), UDP to port 53 (DNS query names, wire format). A match drops the packet and counts it;
 * everything else is forwarded unchanged by the port table.
 *
 * Counter uf_stats: 0 inspected and passed, 1 blocked, 2 not inspected (other traffic), 3 no route. */
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>

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

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; tcp_t tcp; udp_t udp; }
struct meta_t { bit<1> matched; bit<8> mode; bit<32> offset; bit<1> inspect; }

parser UfParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
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
    state parse_tcp { pkt.extract(hdr.tcp); transition accept; }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
}

control UfNoChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control UfIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    dfa_matcher() blocklist;
    counter(4, CounterType.packets) uf_stats;

    action forward(bit<9> port) { sm.egress_spec = port; }
    action no_route() { mark_to_drop(sm); }
    table uf_port {
        key = { sm.ingress_port : exact; }
        actions = { forward; no_route; }
        default_action = no_route();
        size = 512;
    }

    apply {
        if (hdr.tcp.isValid() && (hdr.tcp.dst_port == 80 || hdr.tcp.dst_port == 443)) {
            meta.inspect = 1;
            meta.mode = 0;
            /* TCP options are part of the payload here: skip them */
            meta.offset = ((bit<32>)hdr.tcp.data_offset - 5) * 4;
        } else if (hdr.udp.isValid() && hdr.udp.dst_port == 53) {
            meta.inspect = 1;
            meta.mode = 1;
            meta.offset = 12;   /* the DNS header */
        }
        if (meta.inspect == 1) {
            blocklist.scan(meta.mode, meta.offset, meta.matched);
            if (meta.matched == 1) {
                uf_stats.count(1);
                mark_to_drop(sm);
                return;
            }
            uf_stats.count(0);
        } else {
            uf_stats.count(2);
        }
        uf_port.apply();
        if (sm.egress_spec == 511) {
            uf_stats.count(3);
        }
    }
}

control UfEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control UfDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.tcp); pkt.emit(hdr.udp); }
}

V1Switch(UfParser(), UfNoChecksum(), UfIngress(), UfEgress(), UfNoChecksum(), UfDeparser()) main;
