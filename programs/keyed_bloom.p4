/* keyed_bloom.p4: a compact "known flow" pre-check with a Bloom filter and a count-min sketch in registers,
 * both indexed by a keyed hash of the flow (the compact state lookup of the 10 Gbit/s gateway paper, made
 * robust with the keyed hashes of the cryptographic hashing paper).
 *
 * Packets from a LEARN port (inside) insert their flow (src, dst, sport, dport, proto) into the Bloom filter
 * and are forwarded. Packets from a CHECK port (outside) are forwarded only if their reverse flow is in the
 * filter (return traffic of a known flow); a count-min sketch counts them per flow and drops a flow once its
 * estimate exceeds the port's limit. Everything else is dropped and counted.
 *
 * The index hash is crypto_hash(KB_ALG), SipHash-2-4 with the port's secret key by default. With
 * -D KB_ALG=CRC32 (unkeyed, linear) anyone can compute the indices and craft flows that collide with a known
 * one, passing the check; tests/hashing/test_keyed_bloom.py shows both.
 *
 * Counter kb_stats: 0 flows learned, 1 known (forwarded), 2 unknown (dropped), 3 over the limit (dropped),
 * 4 not IPv4 TCP/UDP on a check port (dropped), 5 unconfigured port. */
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>

#ifndef KB_ALG
#define KB_ALG SIPHASH_2_4
#endif

#define KB_BITS 16
#define KB_SIZE 65536

const bit<8> MODE_NONE = 0;
const bit<8> MODE_LEARN = 1;
const bit<8> MODE_CHECK = 2;

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

/* the first four bytes of TCP and UDP */
header ports_t {
    bit<16> src_port;
    bit<16> dst_port;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    ports_t    ports;
}

struct meta_t {
    bit<8>   mode;
    bit<128> key;
    bit<32>  limit;
    bit<32>  h;
    bit<1>   b0;
    bit<1>   b1;
    bit<32>  c0;
    bit<32>  c1;
}

parser KbParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 6): parse_ports;
            (5, 0, 17): parse_ports;
            default: accept;
        }
    }
    state parse_ports {
        pkt.extract(hdr.ports);
        transition accept;
    }
}

control KbNoChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control KbIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    crypto_hash(p4sec_hash_alg_t.KB_ALG) flow_hash;
    register<bit<1>>(KB_SIZE) bloom0;
    register<bit<1>>(KB_SIZE) bloom1;
    register<bit<32>>(KB_SIZE) cms0;
    register<bit<32>>(KB_SIZE) cms1;
    counter(6, CounterType.packets) kb_stats;

    action learn(bit<9> port, bit<128> key) {
        sm.egress_spec = port;
        meta.mode = MODE_LEARN;
        meta.key = key;
    }
    action check(bit<9> port, bit<128> key, bit<32> limit) {
        sm.egress_spec = port;
        meta.mode = MODE_CHECK;
        meta.key = key;
        meta.limit = limit;
    }
    action unconfigured() {
        meta.mode = MODE_NONE;
    }
    table kb_port {
        key = { sm.ingress_port : exact; }
        actions = { learn; check; unconfigured; }
        default_action = unconfigured();
        size = 512;
    }

    apply {
        kb_port.apply();
        if (meta.mode == MODE_NONE) {
            kb_stats.count(5);
            mark_to_drop(sm);
            return;
        }
        if (!hdr.ports.isValid()) {
            if (meta.mode == MODE_CHECK) {
                kb_stats.count(4);
                mark_to_drop(sm);
            }
            return;
        }
        if (meta.mode == MODE_LEARN) {
            flow_hash.get(meta.h, meta.key, { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ports.src_port,
                                              hdr.ports.dst_port, hdr.ipv4.protocol });
            bloom0.write((bit<32>)meta.h[15:0], 1);
            bloom1.write((bit<32>)meta.h[31:16], 1);
            kb_stats.count(0);
            return;
        }
        /* check: the reverse flow must be known */
        flow_hash.get(meta.h, meta.key, { hdr.ipv4.dst_addr, hdr.ipv4.src_addr, hdr.ports.dst_port,
                                          hdr.ports.src_port, hdr.ipv4.protocol });
        bloom0.read(meta.b0, (bit<32>)meta.h[15:0]);
        bloom1.read(meta.b1, (bit<32>)meta.h[31:16]);
        if (meta.b0 == 0 || meta.b1 == 0) {
            kb_stats.count(2);
            mark_to_drop(sm);
            return;
        }
        /* count-min sketch of the flow's packets: the estimate is the smaller row */
        cms0.read(meta.c0, (bit<32>)meta.h[15:0]);
        cms1.read(meta.c1, (bit<32>)meta.h[31:16]);
        meta.c0 = meta.c0 + 1;
        meta.c1 = meta.c1 + 1;
        cms0.write((bit<32>)meta.h[15:0], meta.c0);
        cms1.write((bit<32>)meta.h[31:16], meta.c1);
        bit<32> estimate = meta.c0 < meta.c1 ? meta.c0 : meta.c1;
        if (estimate > meta.limit) {
            kb_stats.count(3);
            mark_to_drop(sm);
            return;
        }
        kb_stats.count(1);
    }
}

control KbEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control KbDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ports);
    }
}

V1Switch(KbParser(), KbNoChecksum(), KbIngress(), KbEgress(), KbNoChecksum(), KbDeparser()) main;
