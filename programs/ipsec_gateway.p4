// ipsec_gateway.p4: an IPsec (ESP tunnel mode) site-to-site gateway on v1model with p4sec's esp_sad extern,
// after the P4-IPsec design: SPD, SAD (keys and SA state in the extern, filled by the controller), and LPM
// forwarding. IPv4 (20-byte header) and IPv6 (no extension headers), inner and outer in any combination:
// the outer header comes from the SA's tunnel endpoints.
//
// Outbound: the SPD (ternary on source, destination, protocol; ranges on the TCP/UDP ports; priorities;
//   no match = discard) says protect(sa), bypass or discard. protect encapsulates the inner packet (parsed
//   IP header + payload) with the SA, which returns the outer IP header from its tunnel endpoints in the
//   header instance of its family; the outer packet is forwarded by LPM in the same pass.
// Inbound: an ESP packet is looked up in SAD-dec (outer source, destination, SPI) and decapsulated with that
//   SA (ICV, padding, replay checked in the extern), which returns the inner IP header; the inner packet is
//   forwarded by LPM in the same pass (an inner IPv4 header with options recirculates to be parsed). ESP to
//   one of the gateway's own addresses (local_addr) without an SA is dropped as NO_SA; other ESP is
//   forwarded (transit).
// ESP in UDP (RFC 3948): UDP to port UDP_ENCAP_PORT (4500) is ESP unless the four bytes after the UDP header
//   are zero (an IKE message: plain UDP); it is looked up and decapsulated as ESP is, the UDP header staying
//   in the payload for the SA, which is configured with UDP encapsulation (udp_encap) and takes it off; an SA
//   with udp_encap sends its packets in UDP. A packet whose encapsulation is not its SA's: P4SEC_WRONG_ENCAP.
// Sides: the ports port_side lists are WAN ports (default: LAN). Clear traffic arriving from the WAN is never
//   protected: an SPD protect match there is dropped and counted (wan_drops[WAN_SPOOFED]); only ESP and the
//   SPD's bypass traffic are accepted from the WAN (a discard or no policy: wan_drops[WAN_DENIED]).
// Selectors (RFC 4301 5.2): after decryption the inner packet must match its SA's selectors in sa_selectors /
//   sa_selectors6 (SA index exact; inner source, destination and protocol ternary; selector_ports adds port
//   ranges, checked once the inner ports are parsed, recirculating the inner packet if need be). No match: the
//   packet is dropped and counted as SELECTOR_MISMATCH in esp_status and sa_counters.
// Counters: esp_status (per status code), sa_counters (per SA and status: index sa * 16 + status), wan_drops.
// Lifetime events (soft, hard) of the SAs go to the controller as digests sa_event_t {sa_index, event, spi}.
#include <core.p4>
#include <v1model.p4>
#include <p4sec.p4>

/* SA slots in the SAD (both directions share them); -D SA_SLOTS=N for large deployments */
#ifndef SA_SLOTS
#define SA_SLOTS 1024
#endif
/* the UDP port of ESP in UDP (RFC 3948, NAT traversal); -D UDP_ENCAP_PORT=N for another */
#ifndef UDP_ENCAP_PORT
#define UDP_ENCAP_PORT 4500
#endif
/* SPD entries (per IP version); -D SPD_SIZE=N for many tunnels (one policy per tunnel and direction) */
#ifndef SPD_SIZE
#define SPD_SIZE 4096
#endif

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86DD;
const bit<8>  PROTO_ESP = 50;
/* esp_status / sa_counters index of a decrypted packet outside its SA's selectors (after the P4SEC_* codes) */
const bit<8>  SELECTOR_MISMATCH = 12;
/* wan_drops indexes: clear traffic from the WAN without a bypass policy; clear traffic from the WAN that matched
   a protect policy (spoofed as coming from a protected site) */
const bit<32> WAN_DENIED = 0;
const bit<32> WAN_SPOOFED = 1;

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

header ipv6_t {
    bit<4>   version;
    bit<8>   traffic_class;
    bit<20>  flow_label;
    bit<16>  payload_len;
    bit<8>   next_hdr;
    bit<8>   hop_limit;
    bit<128> src_addr;
    bit<128> dst_addr;
}

header esp_t {
    bit<32> spi;
    bit<32> seq;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    ipv6_t     ipv6;
}

struct sa_event_t {
    bit<32> sa_index;
    bit<8>  event;      /* 1 soft limit reached, 2 hard limit reached */
    bit<32> spi;        /* the SA's SPI: the next SA in the same slot has another one */
}

struct meta_t {
    esp_t   esp;
    bit<16> sport;
    bit<16> dport;
    bit<8>  event;
    bit<32> event_spi;
    @field_list(1) bit<32> sa_index;    /* kept across recirculation: the selectors of the SA decrypted with */
    bit<8>  status;
    bit<8>  ip_version;     /* the IP version encap_split / decap_split left in the headers */
    @field_list(1) bit<1> decrypted;
    @field_list(1) bit<1> encrypted;
    @field_list(1) bit<1> from_wan;     /* arrived on a WAN port (port_side) */
    bit<1>  ports_parsed;               /* sport and dport are the packet's (parse_ports) */
    bit<1>  esp_in_udp;                 /* UDP to UDP_ENCAP_PORT carrying ESP (meta.esp is its header) */
    bit<16> sel_sport_lo;               /* the port ranges of a selector_ports match */
    bit<16> sel_sport_hi;
    bit<16> sel_dport_lo;
    bit<16> sel_dport_hi;
}

parser GwParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(sm.instance_type, hdr.ethernet.ether_type) {
            (0, ETHERTYPE_IPV4): parse_ipv4;
            (0, ETHERTYPE_IPV6): parse_ipv6;
            (0, _): accept;
            default: by_version;        /* recirculated after encap/decap: the EtherType is the old one */
        }
    }
    state by_version {
        transition select(pkt.lookahead<bit<4>>()) {
            4: parse_ipv4;
            6: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            PROTO_ESP: parse_esp;
            6: parse_ports;
            17: parse_udp;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (_, PROTO_ESP): parse_esp;
            (0, 6): parse_ports;
            (0, 17): parse_udp;
            default: accept;
        }
    }
    state parse_ports {
        // the ports stay in the payload (protected with it); the SPD matches on them
        bit<32> ports = pkt.lookahead<bit<32>>();
        meta.sport = ports[31:16];
        meta.dport = ports[15:0];
        meta.ports_parsed = 1;
        transition accept;
    }
    state parse_udp {
        bit<32> ports = pkt.lookahead<bit<32>>();
        meta.sport = ports[31:16];
        meta.dport = ports[15:0];
        meta.ports_parsed = 1;
        transition select(ports[15:0]) {
            UDP_ENCAP_PORT: parse_udp_encap;
            default: accept;
        }
    }
    state parse_udp_encap {
        // the UDP header, then an SPI (never 0) or the four zero bytes in front of an IKE message
        bit<96> u = pkt.lookahead<bit<96>>();
        transition select(u[31:0]) {
            0: accept;
            default: parse_esp_in_udp;
        }
    }
    state parse_esp_in_udp {
        // the UDP header stays in the payload (the SA takes it off); look at the SPI after it
        bit<128> u = pkt.lookahead<bit<128>>();
        meta.esp.setValid();
        meta.esp.spi = u[63:32];
        meta.esp.seq = u[31:0];
        meta.esp_in_udp = 1;
        transition accept;
    }
    state parse_esp {
        // the ESP header stays in the payload (the extern decapsulates from it); look at its SPI only
        meta.esp = pkt.lookahead<esp_t>();
        transition accept;
    }
}

control GwVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control GwIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    esp_sad(SA_SLOTS) sad;
    /* packets per ESP status code (P4SEC_*) */
    counter(16, CounterType.packets_and_bytes) esp_status;
    /* per SA and status code: index sa_index * 16 + status */
    counter(SA_SLOTS * 16, CounterType.packets_and_bytes) sa_counters;
    /* clear traffic from the WAN dropped: index WAN_DENIED or WAN_SPOOFED */
    counter(2, CounterType.packets_and_bytes) wan_drops;

    action drop() {
        mark_to_drop(sm);
    }
    action to_me() { }
    action protect(bit<32> sa_index) {
        meta.sa_index = sa_index;
    }
    action bypass() { }
    action discard() {
        mark_to_drop(sm);
    }
    action dec_sa(bit<32> sa_index) {
        meta.sa_index = sa_index;
    }
    action set_nhop(bit<48> dst_mac, bit<48> src_mac, bit<9> port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    /* the side a port is on: WAN ports are listed (from_wan), the others are LAN ports */
    action from_wan() {
        meta.from_wan = 1;
    }
    table port_side {
        key = { sm.ingress_port : exact; }
        actions = { from_wan; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    /* the selectors of the inbound SAs: a decrypted packet must match one of its SA's entries */
    action selector_ok() { }
    action selector_ports(bit<16> sport_lo, bit<16> sport_hi, bit<16> dport_lo, bit<16> dport_hi) {
        meta.sel_sport_lo = sport_lo;
        meta.sel_sport_hi = sport_hi;
        meta.sel_dport_lo = dport_lo;
        meta.sel_dport_hi = dport_hi;
    }
    action selector_mismatch() { }
    table sa_selectors {
        key = {
            meta.sa_index : exact;
            hdr.ipv4.src_addr : ternary;
            hdr.ipv4.dst_addr : ternary;
            hdr.ipv4.protocol : ternary;
        }
        actions = { selector_ok; selector_ports; selector_mismatch; }
        default_action = selector_mismatch();
        size = SA_SLOTS;
    }
    table sa_selectors6 {
        key = {
            meta.sa_index : exact;
            hdr.ipv6.src_addr : ternary;
            hdr.ipv6.dst_addr : ternary;
            hdr.ipv6.next_hdr : ternary;
        }
        actions = { selector_ok; selector_ports; selector_mismatch; }
        default_action = selector_mismatch();
        size = SA_SLOTS;
    }

    /* the gateway's own (tunnel endpoint) addresses */
    table local_addr {
        key = { hdr.ipv4.dst_addr : exact; }
        actions = { to_me; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    /* security policy database */
    table spd {
        key = {
            hdr.ipv4.src_addr : ternary;
            hdr.ipv4.dst_addr : ternary;
            hdr.ipv4.protocol : ternary;
            meta.sport : range;
            meta.dport : range;
        }
        actions = { protect; bypass; discard; }
        default_action = discard();
        size = SPD_SIZE;
    }
    /* SAD-dec: the inbound SA of an ESP packet */
    table sad_dec {
        key = {
            hdr.ipv4.src_addr : exact;
            hdr.ipv4.dst_addr : exact;
            meta.esp.spi : exact;
        }
        actions = { dec_sa; NoAction; }
        default_action = NoAction();
        size = SA_SLOTS;
    }

    /* count per SA and report its lifetime events to the controller */
    action account_sa() {
        sa_counters.count(meta.sa_index * 16 + (bit<32>) meta.status);
        sad.lifetime_event(meta.sa_index, meta.event, meta.event_spi);
    }
    action report_event() {
        digest<sa_event_t>(1, { meta.sa_index, meta.event, meta.event_spi });
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm; }
        actions = { set_nhop; drop; }
        default_action = drop();
        size = 65536;
    }

    /* the same for IPv6 */
    action set_nhop6(bit<48> dst_mac, bit<48> src_mac, bit<9> port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        sm.egress_spec = port;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }
    table local_addr6 {
        key = { hdr.ipv6.dst_addr : exact; }
        actions = { to_me; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    table spd6 {
        key = {
            hdr.ipv6.src_addr : ternary;
            hdr.ipv6.dst_addr : ternary;
            hdr.ipv6.next_hdr : ternary;
            meta.sport : range;
            meta.dport : range;
        }
        actions = { protect; bypass; discard; }
        default_action = discard();
        size = SPD_SIZE;
    }
    table sad_dec6 {
        key = {
            hdr.ipv6.src_addr : exact;
            hdr.ipv6.dst_addr : exact;
            meta.esp.spi : exact;
        }
        actions = { dec_sa; NoAction; }
        default_action = NoAction();
        size = SA_SLOTS;
    }
    table ipv6_lpm {
        key = { hdr.ipv6.dst_addr : lpm; }
        actions = { set_nhop6; drop; }
        default_action = drop();
        size = 65536;
    }

    /* after decapsulation or encapsulation: the payload is a whole IP packet; recirculate it */
    action recirculate_payload() {
        hdr.ipv4.setInvalid();
        hdr.ipv6.setInvalid();
        sm.egress_spec = 0;
        recirculate_preserving_field_list(1);
    }

    /* after encap_split / decap_split: the header of meta.ip_version is the packet's IP header now */
    action use_ip_version() {
        if (meta.ip_version == 4) {
            hdr.ipv4.setValid();
            hdr.ipv6.setInvalid();
            hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        } else {
            hdr.ipv6.setValid();
            hdr.ipv4.setInvalid();
            hdr.ethernet.ether_type = ETHERTYPE_IPV6;
        }
    }

    /* a decrypted packet whose IP header is in place but whose ports are not parsed yet: parse it again */
    action recirculate_inner() {
        sm.egress_spec = 0;
        recirculate_preserving_field_list(1);
    }

    /* after an SA was used: count it, report its lifetime events, drop on failure */
    action finish_sa() {
        esp_status.count((bit<32>) meta.status);
        if (meta.status != P4SEC_NO_SA) {
            account_sa();
            if (meta.event != 0) {
                report_event();
            }
        }
    }

    apply {
        bool v4 = hdr.ipv4.isValid();
        bool v6 = hdr.ipv6.isValid();
        if ((!v4 && !v6) || (v4 && (hdr.ipv4.ihl != 5 || sm.checksum_error == 1))) {
            drop();
            return;
        }
        /* a recirculated packet carries the EtherType of what it was before encap/decap */
        hdr.ethernet.ether_type = v4 ? ETHERTYPE_IPV4 : ETHERTYPE_IPV6;
        /* the side it arrived on (kept in meta.from_wan across recirculation) */
        if (sm.instance_type == 0) {
            port_side.apply();
        }

        /* inbound ESP (or ESP in UDP): SAD-dec on outer source, destination and SPI */
        bool esp = (v4 && hdr.ipv4.protocol == PROTO_ESP) || (v6 && hdr.ipv6.next_hdr == PROTO_ESP) || meta.esp_in_udp == 1;
        if (esp && meta.encrypted == 0 && meta.decrypted == 0) {
            bool found;
            if (v4) {
                found = sad_dec.apply().hit;
            } else {
                found = sad_dec6.apply().hit;
            }
            if (found) {
                sad.decap_split(meta.sa_index, hdr.ipv4, hdr.ipv6, meta.ip_version, meta.status);
                finish_sa();
                if (meta.status != P4SEC_OK) {
                    drop();
                    return;
                }
                meta.decrypted = 1;
                if (meta.ip_version == 0) {
                    recirculate_payload();  // the payload is the whole inner packet: parse it again
                    return;
                }
                use_ip_version();           // the inner header is in place: forward it below
            }
            bool mine;
            if (v4) {
                mine = local_addr.apply().hit;
            } else {
                mine = local_addr6.apply().hit;
            }
            if (mine) {
                esp_status.count((bit<32>) P4SEC_NO_SA);
                drop();
                return;
            }
            /* transit ESP: forwarded below */
        } else if (meta.decrypted == 0 && meta.encrypted == 0) {
            /* outbound: the security policy */
            bool protect_it = false;
            bool discard_it = false;
            if (v4) {
                switch (spd.apply().action_run) {
                    protect: { protect_it = true; }
                    discard: { discard_it = true; }
                }
            } else {
                switch (spd6.apply().action_run) {
                    protect: { protect_it = true; }
                    discard: { discard_it = true; }
                }
            }
            if (meta.from_wan == 1) {
                /* from the WAN only the bypass policies' clear traffic is accepted: never protected outbound */
                if (protect_it) {
                    wan_drops.count(WAN_SPOOFED);
                    drop();
                    return;
                }
                if (discard_it) {
                    wan_drops.count(WAN_DENIED);
                }
            }
            if (discard_it) {
                return;
            }
            if (protect_it) {
                if (v4) {
                    sad.encap_split(meta.sa_index, hdr.ipv4, hdr.ipv4, hdr.ipv6, meta.ip_version, meta.status);
                } else {
                    sad.encap_split(meta.sa_index, hdr.ipv6, hdr.ipv4, hdr.ipv6, meta.ip_version, meta.status);
                }
                finish_sa();
                if (meta.status != P4SEC_OK) {
                    drop();
                    return;
                }
                meta.encrypted = 1;
                use_ip_version();           // the outer header is in place, ESP in the payload: forward it below
            }
        }
        if (meta.decrypted == 1) {
            /* the inner packet must match its SA's selectors */
            bool selected = false;
            bool by_ports = false;
            if (hdr.ipv4.isValid()) {
                switch (sa_selectors.apply().action_run) {
                    selector_ok: { selected = true; }
                    selector_ports: { by_ports = true; }
                }
            } else {
                switch (sa_selectors6.apply().action_run) {
                    selector_ok: { selected = true; }
                    selector_ports: { by_ports = true; }
                }
            }
            if (by_ports) {
                if (meta.ports_parsed == 0 && sm.instance_type == 0) {
                    recirculate_inner();    // the inner ports are still in the payload: parse the packet again
                    return;
                }
                selected = meta.ports_parsed == 1
                    && meta.sport >= meta.sel_sport_lo && meta.sport <= meta.sel_sport_hi
                    && meta.dport >= meta.sel_dport_lo && meta.dport <= meta.sel_dport_hi;
            }
            if (!selected) {
                esp_status.count((bit<32>) SELECTOR_MISMATCH);
                sa_counters.count(meta.sa_index * 16 + (bit<32>) SELECTOR_MISMATCH);
                drop();
                return;
            }
        }
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.ttl <= 1) {
                drop();
                return;
            }
            ipv4_lpm.apply();
        } else {
            if (hdr.ipv6.hop_limit <= 1) {
                drop();
                return;
            }
            ipv6_lpm.apply();
        }
    }
}

control GwEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control GwComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control GwDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv6);
    }
}

V1Switch(GwParser(), GwVerifyChecksum(), GwIngress(), GwEgress(), GwComputeChecksum(), GwDeparser()) main;
