"""The store's records (p4sec.ipsec.store.Records) on a store written the way earlier controllers wrote it (raw
rows in the same tables, the same key-value keys): every kind reads back, and what Records writes is what an
earlier controller would read (the on-disk format does not change)."""
import json
import sqlite3
import time

from p4sec.ipsec import store
from p4sec.ipsec.controller import IpsecController


def old_store(path):
    """A store as an earlier controller left it: a tunnel of each kind, SAs, key-value records, an intent."""
    db = sqlite3.connect(path)
    db.executescript(store.SCHEMA)
    now = time.time()
    db.execute("insert into tunnel values ('T', 'A', 'B', 'aes-gcm-128', '{\"seconds\": 60}', 'null', ?, 'up')", (now,))
    db.execute("insert into tunnel values ('office@alice', 'A', 'host:alice', 'aes-gcm-128', 'null', 'null', ?, 'up')", (now + 1,))
    db.execute("insert into tunnel values ('ike-A-1', 'A', 'ike:203.0.113.9', 'aes-gcm-128', 'null', 'null', ?, 'up')", (now + 2,))
    for spi, tunnel, src, dst, out_slot, in_slot, state in (
            (0x101, "T", "A", "B", 0, 1, "active"), (0x102, "T", "B", "A", 1, 0, "active"), (0x100, "T", "A", "B", 0, 3, "retiring"),
            (0x201, "office@alice", "host:alice", "A", -1, 2, "active"), (0x301, "ike-A-1", "ike:203.0.113.9", "A", -1, 4, "active")):
        db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (spi, tunnel, src, dst, out_slot, in_slot, json.dumps({"spi": spi, "tunnel": ["192.0.2.1", "192.0.2.2"]}), now, state))
    for key, value in (("sites:T", json.dumps({"A": "10.1.0.0/16", "B": "10.2.0.0/16"})), ("encap:T", "udp"),
                       ("pair:A=10.1.0.0/16|B=10.2.0.0/16", "T"), ("inner:office@alice", "10.9.0.1/32"),
                       ("hostinfo:office@alice", json.dumps({"address": "198.51.100.7", "mac": "02:00:00:00:77:77"})),
                       ("addr:office:alice", "10.9.0.1"), ("ikeport:A", json.dumps([3, "02:00:00:00:00:33"])),
                       ("ikepol:A|10.1.0.0/16|10.8.0.0/16", json.dumps({"gw": "A", "tunnel": "ike-A-1", "src": "10.1.0.0/16",
                                                                        "dst": "10.8.0.0/16", "peer": "203.0.113.9", "count": 1,
                                                                        "slot": None})),
                       ("ikesel:769", json.dumps([["10.8.1.0/24", "10.1.0.0/16"]]))):
        db.execute("insert into kv values (?, ?)", (key, value))
    db.execute("insert into intent (op, tunnel, data, t) values ('renew', 'T', ?, ?)", (json.dumps({"fresh": [0x101], "old": 0x100}), now))
    db.execute("insert into event values (?, 'T', 'up (aes-gcm-128)')", (now,))
    db.commit()
    db.close()


def test_an_earlier_store_reads_back_through_the_records(tmp_path):
    old_store(tmp_path / "old.db")
    ctl = IpsecController(str(tmp_path / "old.db"))
    try:
        rec = ctl.records
        assert [t.name for t in rec.tunnels()] == ["T", "office@alice", "ike-A-1"]
        assert rec.tunnel("T").soft == '{"seconds": 60}' and rec.tunnel("T", states=("down",)) is None
        assert ctl.tunnel_sites("T") == {"A": "10.1.0.0/16", "B": "10.2.0.0/16"} and ctl.tunnel_encap("T") == "udp"
        assert rec.pair_owner({"B": "10.2.0.0/16", "A": "10.1.0.0/16"}) == "T"
        assert ctl.hosts.inner("office@alice") == "10.9.0.1/32"
        assert ctl.hosts.info("office@alice") == {"address": "198.51.100.7", "mac": "02:00:00:00:77:77"}
        assert rec.host_address("office", "alice") == "10.9.0.1" and rec.host_addresses("office") == {"10.9.0.1"}
        assert rec.ike_ports() == {"A": (3, "02:00:00:00:00:33")}
        assert rec.ike_policy("A", "10.1.0.0/16", "10.8.0.0/16")["tunnel"] == "ike-A-1" and len(rec.ike_policies("A")) == 1
        assert rec.ike_selectors() == {0x301: [["10.8.1.0/24", "10.1.0.0/16"]]}
        assert sorted(rec.active_spis("T")) == [0x101, 0x102] and rec.active_spi(gateway="B", slot=1) == 0x101
        assert rec.slots_in_use("A") == {0, 2, 4} and rec.slots_in_use("B") == {1, 3} and rec.sas_with_peers("A", "ike:") == [0x301]
        assert ctl.hosts.is_host_sa(0x201) and not ctl.hosts.is_host_sa(0x101)
        assert [(i["op"], i["tunnel"], i["data"]) for i in ctl.intents()] == [("renew", "T", {"fresh": [0x101], "old": 0x100})]
        assert ctl.journal.fresh() == {0x101}
        assert [w for _, _, w in ctl.events("T")] == ["up (aes-gcm-128)"]
        assert ctl.keys(0x102)["spi"] == 0x102
    finally:
        ctl.close()


def test_what_the_records_write_is_what_an_earlier_controller_reads(tmp_path):
    ctl = IpsecController(str(tmp_path / "new.db"))
    rec = ctl.records
    rec.put_tunnel("T", "A", "B", "aes-gcm-128", {"seconds": 60}, None, "up")
    rec.put_sites("T", {"A": "10.1.0.0/16", "B": "10.2.0.0/16"})
    rec.put_encap("T", "esp")
    rec.claim_pair({"A": "10.1.0.0/16", "B": "10.2.0.0/16"}, "T")
    rec.add_sa(0x101, "T", "A", "B", 0, 1, {"spi": 0x101}, "active")
    rec.put_inner("office@alice", "10.9.0.1/32")
    rec.put_ike_selectors(0x301, [["10.8.1.0/24", "10.1.0.0/16"]])
    rec.add_event("T", "up")
    rec.commit()
    ctl.close()
    db = sqlite3.connect(tmp_path / "new.db")
    assert db.execute("select name, a, b, suite, soft, hard, state from tunnel").fetchall() == \
        [("T", "A", "B", "aes-gcm-128", '{"seconds": 60}', "null", "up")]
    assert db.execute("select spi, tunnel, src, dst, out_slot, in_slot, config, state from sa").fetchall() == \
        [(0x101, "T", "A", "B", 0, 1, '{"spi": 257}', "active")]
    assert dict(db.execute("select key, value from kv").fetchall()) == {
        "sites:T": '{"A": "10.1.0.0/16", "B": "10.2.0.0/16"}', "encap:T": "esp", "pair:A=10.1.0.0/16|B=10.2.0.0/16": "T",
        "inner:office@alice": "10.9.0.1/32", "ikesel:769": '[["10.8.1.0/24", "10.1.0.0/16"]]'}
    assert db.execute("select tunnel, what from event").fetchall() == [("T", "up")]
    # a pair released by another tunnel stays its owner's
    ctl = IpsecController(str(tmp_path / "new.db"))
    ctl.records.release_pair({"A": "10.1.0.0/16", "B": "10.2.0.0/16"}, "U")
    ctl.records.commit()
    assert ctl.records.pair_owner({"A": "10.1.0.0/16", "B": "10.2.0.0/16"}) == "T"
    ctl.close()
