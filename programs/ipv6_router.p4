// ipv6_router.p4: an IPv6 LPM router on v1model. The 128-bit destination address is looked up among the
// routes (table ipv6_lpm), which set the next hop's MAC addresses and the egress port; the hop limit is
// decremented. Packets that are not IPv6, whose hop limit is <= 1, or that have no route are dropped.
// Used by `p4sec bench --ipv6`.
#include <core.p4>
#include <v1model.p4>

typedef bit<48>  mac_addr_t;
typedef bit<128> ipv6_addr_t;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

struct headers_t {
    ethernet_t ethernet;
    ipv6_t     ipv6;
}

struct metadata_t {}

parser RouterParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x86dd: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition accept;
    }
}

control RouterVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RouterIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action drop() {
        mark_to_drop(sm);
    }
    action set_nhop(mac_addr_t dst_mac, mac_addr_t src_mac, bit<9> port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        sm.egress_spec = port;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }
    table ipv6_lpm {
        key = { hdr.ipv6.dst_addr : lpm; }
        actions = { set_nhop; drop; }
        default_action = drop();
        size = 65536;
    }
    apply {
        if (!hdr.ipv6.isValid() || hdr.ipv6.version != 6 || hdr.ipv6.hop_limit <= 1) {
            drop();
            return;
        }
        ipv6_lpm.apply();
    }
}

control RouterEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { }
}

control RouterComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RouterDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv6);
    }
}

V1Switch(RouterParser(), RouterVerifyChecksum(), RouterIngress(), RouterEgress(),
         RouterComputeChecksum(), RouterDeparser()) main;
