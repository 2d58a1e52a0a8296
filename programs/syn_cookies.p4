/* syn_cookies.p4: SYN flood defence with keyed-hash cookies, answered in the data plane.
 *
 * Clients reach the server through a PROTECT port. While the defence is active (a table parameter the
 * controller flips when it sees a flood), a SYN from a client that is not yet known is not forwarded: the
 * switch answers it with a SYN-ACK whose sequence number is a cookie: the first 31 bits of
 * SipHash-2-4(key, client address, server address, client port, server port, epoch) followed by the low bit
 * of the epoch. No state is kept per SYN. The client's ACK must acknowledge cookie + 1, checked against the
 * epoch its low bit names: the current one or the one before it, so a handshake that straddles an epoch
 * change still completes (as Linux accepts cookies of the previous counter value). Then the client
 * address is added to an allowlist (a
 * register indexed by a keyed hash of the address) and the switch resets the half-open connection (RST with
 * the ACK's acknowledgement number as sequence number), so that the client's next attempt goes straight to
 * the server. Wrong cookies and other packets from unknown clients are dropped and counted. Rotating the
 * key invalidates outstanding cookies at once; advancing the epoch (over P4Runtime) invalidates those of
 * two epochs back. The cookie carries no MSS: the handshake it completes is reset, and the client's next
 * attempt negotiates its MSS with the server itself.
 *
 * Counter sc_stats: 0 SYNs answered with a cookie, 1 valid cookies (client allowed), 2 wrong cookies,
 * 3 other packets from unknown clients dropped, 4 packets of allowed clients forwarded, 5 packets forwarded
 * while the defence is off, 6 packets from the server side, 7 unconfigured port. */
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>

const bit<8> TCP_FIN = 0x01;
const bit<8> TCP_SYN = 0x02;
const bit<8> TCP_RST = 0x04;
const bit<8> TCP_ACK = 0x10;

const bit<8> MODE_NONE = 0;
const bit<8> MODE_PROTECT = 1;
const bit<8> MODE_SERVER = 2;

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

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    tcp_t      tcp;
}

struct meta_t {
    bit<8>   mode;
    bit<1>   active;
    bit<128> key;
    bit<8>   epoch;
    bit<64>  cookie;
    bit<32>  h;
    bit<1>   allowed;
    bit<1>   reply;   /* the packet was rewritten into a reply: recompute checksums */
}

parser ScParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
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
            (5, 0, 6): parse_tcp;
            default: accept;
        }
    }
    state parse_tcp {
        pkt.extract(hdr.tcp);
        transition accept;
    }
}

control ScNoChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control ScIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    crypto_hash(p4sec_hash_alg_t.SIPHASH_2_4) siphash;
    register<bit<1>>(65536) allowlist;
    counter(8, CounterType.packets) sc_stats;

    action protect(bit<9> server_port, bit<1> active, bit<128> key, bit<8> epoch) {
        sm.egress_spec = server_port;
        meta.mode = MODE_PROTECT;
        meta.active = active;
        meta.key = key;
        meta.epoch = epoch;
    }
    action server(bit<9> client_port) {
        sm.egress_spec = client_port;
        meta.mode = MODE_SERVER;
    }
    action unconfigured() {
        meta.mode = MODE_NONE;
    }
    table sc_port {
        key = { sm.ingress_port : exact; }
        actions = { protect; server; unconfigured; }
        default_action = unconfigured();
        size = 512;
    }

    /* turn the packet around: addresses and ports swapped, a bare 20-byte TCP header (options cut off) */
    action reply_with(bit<32> seq, bit<32> ack, bit<8> flags) {
        bit<48> mac = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        bit<32> addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = addr;
        hdr.ipv4.diffserv = 0;
        hdr.ipv4.total_len = 40;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;
        hdr.ipv4.ttl = 64;
        bit<16> port = hdr.tcp.dst_port;
        hdr.tcp.dst_port = hdr.tcp.src_port;
        hdr.tcp.src_port = port;
        hdr.tcp.seq_no = seq;
        hdr.tcp.ack_no = ack;
        hdr.tcp.data_offset = 5;
        hdr.tcp.res = 0;
        hdr.tcp.flags = flags;
        hdr.tcp.window = flags == TCP_RST ? 16w0 : 16w8192;
        hdr.tcp.urgent_ptr = 0;
        sm.egress_spec = sm.ingress_port;
        meta.reply = 1;
        truncate(54);
    }

    apply {
        sc_port.apply();
        if (meta.mode == MODE_NONE) {
            sc_stats.count(7);
            mark_to_drop(sm);
            return;
        }
        if (meta.mode == MODE_SERVER) {
            sc_stats.count(6);
            return;
        }
        if (meta.active == 0) {
            sc_stats.count(5);
            return;
        }
        if (hdr.ipv4.isValid()) {
            siphash.get(meta.h, meta.key, { hdr.ipv4.src_addr });
            allowlist.read(meta.allowed, (bit<32>)meta.h[15:0]);
        }
        if (meta.allowed == 1) {
            sc_stats.count(4);
            return;
        }
        if (!hdr.tcp.isValid()) {
            sc_stats.count(3);
            mark_to_drop(sm);
            return;
        }
        /* the epoch of the cookie: the current one for a SYN; for an ACK, the one whose low bit the
         * acknowledged cookie carries (the current epoch or the one before it) */
        bit<8> epoch = meta.epoch;
        bit<32> acked = hdr.tcp.ack_no - 1;
        if (hdr.tcp.flags != TCP_SYN && acked[0:0] != meta.epoch[0:0]) {
            epoch = meta.epoch - 1;
        }
        siphash.get(meta.cookie, meta.key, { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.tcp.src_port,
                                             hdr.tcp.dst_port, epoch });
        bit<32> cookie = meta.cookie[63:33] ++ epoch[0:0];
        if (hdr.tcp.flags == TCP_SYN) {
            reply_with(cookie, hdr.tcp.seq_no + 1, TCP_SYN | TCP_ACK);
            sc_stats.count(0);
        } else if ((hdr.tcp.flags & (TCP_SYN | TCP_RST | TCP_FIN | TCP_ACK)) == TCP_ACK) {
            if (acked == cookie) {
                allowlist.write((bit<32>)meta.h[15:0], 1);
                reply_with(hdr.tcp.ack_no, 0, TCP_RST);
                sc_stats.count(1);
            } else {
                sc_stats.count(2);
                mark_to_drop(sm);
            }
        } else {
            sc_stats.count(3);
            mark_to_drop(sm);
        }
    }
}

control ScEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control ScComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(meta.reply == 1,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        /* pseudo header and the 20-byte TCP header (the reply carries nothing after it) */
        update_checksum(meta.reply == 1,
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, 16w20,
              hdr.tcp.src_port, hdr.tcp.dst_port, hdr.tcp.seq_no, hdr.tcp.ack_no, hdr.tcp.data_offset,
              hdr.tcp.res, hdr.tcp.flags, hdr.tcp.window, hdr.tcp.urgent_ptr },
            hdr.tcp.checksum, HashAlgorithm.csum16);
    }
}

control ScDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.tcp);
    }
}

V1Switch(ScParser(), ScNoChecksum(), ScIngress(), ScEgress(), ScComputeChecksum(), ScDeparser()) main;
