"""Smoke test of the mixed traffic and re-keying benchmark (p4sec bench-mixed, the gateway paper's Table 3): it runs,
writes its JSON with every field, ESP packets really come out decrypted (checked per packet by the benchmark and
counted independently by the gateway's esp_status counter), and no packet of a live SA is lost while SAs are renewed.
No timing thresholds: the figures themselves are only checked to be there."""
import json
import subprocess


def test_bench_mixed_decrypts_and_loses_nothing_during_rekeying(p4sec_bin, tmp_path):
    out = tmp_path / "m.json"
    r = subprocess.run([str(p4sec_bin), "bench-mixed", "--sizes", "64,1500", "--ks", "0,1,16", "--tunnels", "4", "--seconds", "0.05",
                        "--rounds", "2", "--rekey-rate", "2000", "--grace-ms", "1", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "paper (a)" in r.stdout and "ratio" in r.stdout
    d = json.loads(out.read_text())
    assert d["tunnels"] == 4 and d["suite"] == "aes-gcm-128"
    assert [(row["size"], row["k"]) for row in d["rows"]] == [(s, k) for s in (64, 1500) for k in (0, 1, 16)]
    for row in d["rows"]:
        for mode in ("base", "rekey"):
            m = row[mode]
            for key in ("pps", "gbps_out", "gbps_in", "packets", "esp_in", "esp_decrypted", "plain_in", "plain_out", "lost", "seconds"):
                assert key in m, (mode, key)
            assert m["pps"] > 0 and m["gbps_out"] > 0
            assert m["packets"] == m["esp_in"] + m["plain_in"]
            # k of every 16 packets are ESP (the batch is a whole number of groups of 16)
            assert m["esp_in"] * 16 == m["packets"] * row["k"], (row["size"], row["k"], mode)
            assert m["esp_decrypted"] == m["esp_in"] and m["plain_out"] == m["plain_in"] and m["lost"] == 0
        assert row["rekey"]["lost_esp_live_sas"] == 0
        assert row["rekey"]["renewals"] > 0, "SAs were renewed while the traffic ran"
        assert row["ratio"] > 0
    assert d["renewals"] > 0 and d["retired"] == d["renewals"], "every old SAD-dec entry was removed"
    # the gateway's own counter of successful decapsulations agrees with the per-packet checks
    assert d["esp_decrypted_checked"] == d["esp_status_ok_counter"] > 0
    assert {p["k"] for p in d["paper"]["table3a_mbps"]} == {1, 2, 4, 8, 10, 12, 16}


def test_bench_mixed_rejects_bad_options(p4sec_bin):
    for args, word in ((["--ks", "17"], "--ks"), (["--sizes", "40"], "--sizes"), (["--tunnels", "0"], "--tunnels"),
                       (["--rekey-rate", "0"], "--rekey-rate"), (["--seconds", "0"], "--seconds")):
        r = subprocess.run([str(p4sec_bin), "bench-mixed"] + args, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and word in r.stderr, (args, r.stderr)
        assert "panicked" not in r.stderr
