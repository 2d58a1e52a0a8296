"""The p4sec SDN controller for IPsec (P4-IPsec style, no IKE): it owns the long-term secrets, generates
per-SA keys, and programs gateways running programs/ipsec_gateway.p4 over P4Runtime: local addresses,
routes, SPD entries and SAs (through the esp_sad extern's ExternEntry). It renews SAs make-before-break.

State (gateways, tunnels, SAs) is kept in SQLite so a restarted controller can reconcile.
"""
import json
import os
import sqlite3
import time

from . import runtime


class Gateway:
    def __init__(self, name, switch, address, lan_prefix, lan_port, lan_mac, wan_port, wan_mac, wan_prefix):
        self.name, self.switch, self.address = name, switch, address
        self.lan_prefix, self.lan_port, self.lan_mac = lan_prefix, lan_port, lan_mac
        self.wan_port, self.wan_mac, self.wan_prefix = wan_port, wan_mac, wan_prefix
        self.next_slot = 0

    def setup(self, program_dir):
        s = self.switch
        s.push(program_dir)
        s.table_insert("GwIngress.local_addr", {"hdr.ipv4.dst_addr": ("exact", runtime.ip(self.address))}, "GwIngress.to_me", {})
        net, plen = self.lan_prefix.split("/")
        s.table_insert("GwIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", runtime.ip(net), int(plen))}, "GwIngress.set_nhop",
                       {"dst_mac": runtime.mac(self.lan_mac), "src_mac": runtime.mac("02:00:00:00:00:01"), "port": self.lan_port})
        net, plen = self.wan_prefix.split("/")
        s.table_insert("GwIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", runtime.ip(net), int(plen))}, "GwIngress.set_nhop",
                       {"dst_mac": runtime.mac(self.wan_mac), "src_mac": runtime.mac("02:00:00:00:00:01"), "port": self.wan_port})

    def alloc_slot(self):
        slot = self.next_slot
        self.next_slot += 1
        return slot


def sa_config(spi, key, src, dst, soft_bytes=None, hard_bytes=None):
    null = {"packets": None, "bytes": None, "seconds": None}
    return {"spi": spi, "cipher": "AesGcm128", "integ": "None", "enc_key": list(key), "auth_key": [], "esn": True,
            "replay_window": 1024, "tunnel": [src, dst], "soft": dict(null, bytes=soft_bytes),
            "hard": dict(null, bytes=hard_bytes), "initial_seq": 0}


class IpsecController:
    def __init__(self, db=":memory:"):
        self.db = sqlite3.connect(db)
        self.db.execute("create table if not exists sa (spi integer, gw text, slot integer, direction text,"
                        " peer text, config text, created real, active integer, primary key (spi, gw))")
        self.gateways = {}

    def add_gateway(self, gw, program_dir):
        gw.setup(program_dir)
        self.gateways[gw.name] = gw

    def _new_spi(self):
        while True:
            spi = int.from_bytes(os.urandom(4), "big") | 0x100
            if not self.db.execute("select 1 from sa where spi = ?", (spi,)).fetchone():
                return spi

    def _install(self, gw, slot, direction, peer, cfg):
        gw.switch.extern_write("GwIngress.sad", "add_sa", {"index": slot, "sa": cfg})
        self.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, 1)", (cfg["spi"], gw.name, slot, direction, peer, json.dumps(cfg), time.time()))
        self.db.commit()

    def _new_sa(self, src, dst):
        """A fresh SA from src to dst: installed inbound on dst before outbound on src, so that no packet is
        sent under an SA its receiver does not know yet. Returns (spi, slot on src)."""
        spi, key = self._new_spi(), os.urandom(20)  # AES-128 key + 4-byte salt
        cfg = sa_config(spi, key, src.address, dst.address)
        self._install(dst, dst.alloc_slot(), "in", src.name, cfg)
        out_slot = src.alloc_slot()
        self._install(src, out_slot, "out", dst.name, cfg)
        return spi, out_slot

    def connect(self, a_name, b_name):
        """Install a pair of SAs between two gateways and the SPD entries that use them. Returns the SPIs
        and outbound slots by (source, destination)."""
        a, b = self.gateways[a_name], self.gateways[b_name]
        spis = {(src.name, dst.name): self._new_sa(src, dst) for src, dst in ((a, b), (b, a))}
        for src, dst in ((a, b), (b, a)):
            self._spd(src, dst, spis[(src.name, dst.name)][1], insert=True)
        return spis

    def _spd(self, src, dst, slot, insert):
        s_net, s_len = src.lan_prefix.split("/")
        d_net, d_len = dst.lan_prefix.split("/")
        match = {
            "hdr.ipv4.src_addr": ("ternary", runtime.ip(s_net), runtime.prefix_mask(int(s_len))),
            "hdr.ipv4.dst_addr": ("ternary", runtime.ip(d_net), runtime.prefix_mask(int(d_len))),
        }
        fn = src.switch.table_insert if insert else src.switch.table_modify
        fn("GwIngress.spd", match, "GwIngress.protect", {"sa_index": slot}, priority=10)

    def rekey(self, a_name, b_name):
        """Make-before-break renewal: new inbound SAs first, then switch the SPD to the new outbound SAs,
        then remove the old ones."""
        a, b = self.gateways[a_name], self.gateways[b_name]
        old = self.db.execute("select spi, gw, slot from sa where active = 1 and ((gw = ? and peer = ?) or (gw = ? and peer = ?))",
                              (a.name, b.name, b.name, a.name)).fetchall()
        new = {(src.name, dst.name): self._new_sa(src, dst) for src, dst in ((a, b), (b, a))}
        for src, dst in ((a, b), (b, a)):
            self._spd(src, dst, new[(src.name, dst.name)][1], insert=False)
        for spi, gw, slot in old:
            self.gateways[gw].switch.extern_write("GwIngress.sad", "add_sa", {"index": slot}, delete=True)
            self.db.execute("update sa set active = 0 where spi = ? and gw = ?", (spi, gw))
        self.db.commit()
        return new
