// queue_ecn.p4: explicit congestion notification from the traffic manager's queue depth, for the switch's
// congestion test (tests/switch/test_queues.py). Frames from port 1 go to port 2 and from port 2 to port 1.
// In egress, an ECN-capable IPv4 packet (ECN 1 or 2) that found ECN_THRESHOLD or more packets in its queue
// is marked Congestion Experienced (ECN 3); a UDP packet to port 4242 carries a `qmon` header after its
// UDP header, which egress fills with the packet's queue and time fields (the UDP checksum is cleared).
// Ingress sets the packet's priority from its DSCP class selector (for ports with priority queues).
#include <core.p4>
#include <v1model.p4>

const bit<19> ECN_THRESHOLD = 10;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
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

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// what egress saw: queue depths in packets, times in microseconds
header qmon_t {
    bit<32> enq_qdepth;
    bit<32> deq_qdepth;
    bit<32> deq_timedelta;
    bit<32> enq_timestamp;
    bit<48> ingress_global_timestamp;
    bit<48> egress_global_timestamp;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    qmon_t     qmon;
}

struct metadata_t {}

parser QParser(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, 17): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            4242: parse_qmon;
            default: accept;
        }
    }
    state parse_qmon {
        pkt.extract(hdr.qmon);
        transition accept;
    }
}

control QVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control QIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.ingress_port == 1) {
            sm.egress_spec = 2;
        } else {
            sm.egress_spec = 1;
        }
        // the queue of a port with priority queues: the class selector bits of the DSCP (CS0..CS7)
        if (hdr.ipv4.isValid()) {
            sm.priority = hdr.ipv4.dscp[5:3];
        }
    }
}

control QEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2) && sm.enq_qdepth >= ECN_THRESHOLD) {
            hdr.ipv4.ecn = 3;
        }
        if (hdr.qmon.isValid()) {
            hdr.qmon.enq_qdepth = (bit<32>)sm.enq_qdepth;
            hdr.qmon.deq_qdepth = (bit<32>)sm.deq_qdepth;
            hdr.qmon.deq_timedelta = sm.deq_timedelta;
            hdr.qmon.enq_timestamp = sm.enq_timestamp;
            hdr.qmon.ingress_global_timestamp = sm.ingress_global_timestamp;
            hdr.qmon.egress_global_timestamp = sm.egress_global_timestamp;
            hdr.udp.checksum = 0;
        }
    }
}

control QComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control QDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.qmon);
    }
}

V1Switch(QParser(), QVerifyChecksum(), QIngress(), QEgress(), QComputeChecksum(), QDeparser()) main;
