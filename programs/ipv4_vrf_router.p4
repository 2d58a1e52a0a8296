// ipv4_vrf_router.p4: an IPv4 LPM router with VRFs (virtual routing and forwarding) on v1model.
// Each ingress port belongs to a VRF (table port_vrf; ports not in it to VRF 0); the destination is looked up
// among the routes of the packet's VRF (table ipv4_lpm, keyed by the VRF and the destination prefix), which set
// the next hop's MAC addresses and the egress port. The TTL is decremented and the IPv4 header checksum
// recomputed; packets with TTL <= 1 or no route in their VRF are dropped. Used by `p4sec bench --vrfs N`.
#include <core.p4>
#include <v1model.p4>

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      diffserv;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

typedef bit<16> vrf_id_t;

struct metadata_t {
    vrf_id_t vrf;
}

parser RouterParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    state start {
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

control RouterVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control RouterIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action drop() {
        mark_to_drop(sm);
    }
    action set_nhop(mac_addr_t dst_mac, mac_addr_t src_mac, bit<9> port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_vrf(vrf_id_t vrf) {
        meta.vrf = vrf;
    }
    table port_vrf {
        key = { sm.ingress_port : exact; }
        actions = { set_vrf; }
        default_action = set_vrf(0);
        size = 512;
    }
    table ipv4_lpm {
        key = { meta.vrf : exact; hdr.ipv4.dst_addr : lpm; }
        actions = { set_nhop; drop; }
        default_action = drop();
        size = 65536;
    }
    apply {
        if (!hdr.ipv4.isValid() || sm.checksum_error == 1 || hdr.ipv4.ttl <= 1) {
            drop();
            return;
        }
        port_vrf.apply();
        ipv4_lpm.apply();
    }
}

control RouterEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { }
}

control RouterComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control RouterDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(RouterParser(), RouterVerifyChecksum(), RouterIngress(), RouterEgress(),
         RouterComputeChecksum(), RouterDeparser()) main;
