"""scripts/demo's summary (bench.demo_summary): each part's outcome from the files the parts wrote, the headline
figures beside their anchors, parts that did not run listed with the reason, exit status 1 when a part failed."""
import json

from bench import demo_summary


def write(d, **files):
    for name, v in files.items():
        (d / name.replace("_", ".", 1)).write_text(v if isinstance(v, str) else json.dumps(v))


HASH = {"sizes": [64, 1500], "p4sec_percent_line_rate": [{"algorithm": "SipHash-2-4", "percent": [24.0, 75.0]}],
        "paper": [{"algorithm": "SipHash-2-4", "percent": [76.0, 100.0]}, {"algorithm": "CRC32", "percent": [100, 100]}]}


def test_all_parts_ok(tmp_path, capsys):
    write(tmp_path, vpn_json={"ok": True, "suite": "aes-gcm-128", "received": 2, "decrypted": 2, "renewed": True, "goodput_mbps": 1073},
          p4rt_json={"compiled": True, "forwarded": True, "compile_ms": 22}, stf_txt="123 passed, 0 failed\n",
          bench_json={"engine_pps": 2.04e6, "native_pps": 3.93e6}, hash_json=HASH,
          ipsec_json={"tunnels": 20, "setup_ms_median": 1.93, "renewal_ms_median": 1.12})
    assert demo_summary.main([str(tmp_path), "--seconds", "44"]) == 0
    out = capsys.readouterr().out
    assert "the demo took 0 min 44 s" in out and "demo: all parts that ran worked" in out
    assert "1073 Mbit/s (the P4-IPsec paper's BMv2: 47-49 Mbit/s)" in out
    assert "24 % of 10 GbE line rate at 64 B" in out and "76 % and 100 %" in out
    assert "1.93 ms median" in out and "5.02 ms" in out and "2.04 Mpps" in out
    assert "target" not in out and "NOT met" not in out


def test_a_failed_part_fails_the_demo_and_skips_are_named(tmp_path, capsys):
    write(tmp_path, vpn_json={"ok": False, "suite": "aes-gcm-128", "received": 1, "decrypted": 0, "renewed": False, "goodput_mbps": None},
          bench_json={"engine_pps": 2e6, "native_pps": 4e6}, hash_json=HASH)
    assert demo_summary.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL IPsec VPN" in out and "renewal FAILED" in out and "demo: FAILED: IPsec VPN" in out
    assert "P4 + P4Runtime" in out and "did not finish" in out         # as root, a missing result is a failure


def test_without_root_the_root_parts_are_skipped(tmp_path, capsys):
    write(tmp_path, bench_json={"engine_pps": 2e6, "native_pps": 4e6}, hash_json=HASH)
    assert demo_summary.main([str(tmp_path), "--root", "0"]) == 0
    out = capsys.readouterr().out
    assert out.count("not run: needs root") == 3 and "skip STF conformance" in out and "4 skipped" in out
