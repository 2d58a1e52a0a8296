/* A gateway written against the P4-IPsec prototype's extern interface (extern ipsec_crypt declared by the
 * program itself, as the prototype's programs do): AES-CTR + HMAC-MD5-96 and NULL encryption in actions of a
 * SAD-enc table, decryption in a SAD-dec table on outer addresses and SPI, SA packet counters in a register.
 * p4sec binds ipsec_crypt by name (crates/externs/src/p4/ipsec_crypt.rs). */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_IPV4 = 0x800;
const bit<8>  PROTOCOL_ESP = 0x32;

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification; bit<3> flags;
    bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum; bit<32> srcAddr; bit<32> dstAddr;
}
header esp_t { bit<32> spi; bit<32> sequenceNumber; }

struct metadata { bit<1> unused; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; esp_t esp; }

extern ipsec_crypt {
    ipsec_crypt();
    void decrypt_aes_ctr(inout ipv4_t ipv4, inout esp_t esp, inout standard_metadata_t standard_metadata, in bit<160> key, in bit<128> key_hmac);
    void encrypt_aes_ctr(inout ipv4_t ipv4, inout esp_t esp, in bit<160> key, in bit<128> key_hmac);
    void encrypt_null(inout ipv4_t ipv4, inout esp_t esp);
    void decrypt_null(inout ipv4_t ipv4, inout esp_t esp, inout standard_metadata_t standard_metadata);
}

ipsec_crypt() crypt;

parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { PROTOCOL_ESP: parse_esp; default: accept; }
    }
    state parse_esp { packet.extract(hdr.esp); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(1024) counters;

    action encrypt_ctr(bit<160> key, bit<128> key_hmac, bit<32> spi, bit<32> src, bit<32> dst, bit<32> reg) {
        bit<32> n;
        counters.read(n, reg);
        hdr.esp.setValid();
        hdr.esp.spi = spi;
        hdr.esp.sequenceNumber = n + 1;
        crypt.encrypt_aes_ctr(hdr.ipv4, hdr.esp, key, key_hmac);
        hdr.ipv4.identification = 1; hdr.ipv4.flags = 2; hdr.ipv4.fragOffset = 0; hdr.ipv4.ttl = 64;
        hdr.ipv4.protocol = PROTOCOL_ESP; hdr.ipv4.srcAddr = src; hdr.ipv4.dstAddr = dst;
        counters.write(reg, n + 1);
    }
    action encrypt_null(bit<32> spi, bit<32> src, bit<32> dst, bit<32> reg) {
        bit<32> n;
        counters.read(n, reg);
        hdr.esp.setValid();
        hdr.esp.spi = spi;
        hdr.esp.sequenceNumber = n + 1;
        crypt.encrypt_null(hdr.ipv4, hdr.esp);
        hdr.ipv4.identification = 1; hdr.ipv4.flags = 2; hdr.ipv4.fragOffset = 0; hdr.ipv4.ttl = 64;
        hdr.ipv4.protocol = PROTOCOL_ESP; hdr.ipv4.srcAddr = src; hdr.ipv4.dstAddr = dst;
        counters.write(reg, n + 1);
    }
    action decrypt_ctr(bit<160> key, bit<128> key_hmac) {
        crypt.decrypt_aes_ctr(hdr.ipv4, hdr.esp, sm, key, key_hmac);
        hdr.esp.setInvalid();
    }
    action decrypt_null() {
        crypt.decrypt_null(hdr.ipv4, hdr.esp, sm);
        hdr.esp.setInvalid();
    }
    action forward(bit<9> port) { sm.egress_spec = port; }

    table sad_encrypt {
        key = { hdr.ipv4.dstAddr : lpm; }
        actions = { encrypt_ctr; encrypt_null; NoAction; }
        default_action = NoAction();
    }
    table sad_decrypt {
        key = { hdr.ipv4.srcAddr : exact; hdr.ipv4.dstAddr : exact; hdr.esp.spi : exact; }
        actions = { decrypt_ctr; decrypt_null; NoAction; }
        default_action = NoAction();
    }

    apply {
        if (hdr.esp.isValid()) {
            forward(1);             /* ESP from the WAN (port 2): decrypted to the LAN */
            sad_decrypt.apply();
        } else if (hdr.ipv4.isValid()) {
            forward(2);             /* clear from the LAN (port 1): encrypted to the WAN */
            sad_encrypt.apply();
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control D(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); packet.emit(hdr.esp); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
