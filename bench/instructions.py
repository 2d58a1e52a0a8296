"""Instructions per packet through the engine, the closure engine against the native engine, in one run.

    python -m bench.instructions [--packets N] [--engines closure,native] [--only NAMES] [--json FILE] [--p4sec PATH]

For each pipeline and engine it runs the pipeline's `p4sec` benchmark in its fixed-packet mode (`--packets N`:
exactly N frames through `Engine::process` on the engine `--engine` picks, untimed) twice under valgrind's
callgrind, with N and 2N packets, and reads from each output the calls of `Engine::process` and the instructions
executed inside them; the difference of the two runs divided by the difference of their calls is the instructions
per packet in the steady state (what the first packets cost to warm up cancels out). Instruction counts do not
depend on the machine's load, unlike times.

A packet is one call of `Engine::process`: one frame in, with every clone, resubmission and recirculation it
causes run inside that call (so a program that recirculates counts each pass in its frame's figure, not as more
packets). A run must show exactly as many calls as packets, or it fails: the figure is per frame in.

Pipelines (`--only` takes their names):
- esp-enc-null, esp-dec-null, esp-enc-aes-gcm, esp-dec-aes-gcm: the IPsec gateway (programs/ipsec_gateway.p4, one
  tunnel, 64-byte IP packets; `p4sec bench-esp`) encapsulating and decapsulating with the NULL cipher (the P4
  part and the ESP framing) and with AES-GCM-128;
- url-filter: the URL filter's single-pass program (programs/url_filter_fast.p4) on HTTP, TLS, DNS (inspected,
  passing) and SSH frames in turn (`p4sec bench-engines --pipeline url-filter`); it does not recirculate;
- keyed-bloom: the keyed Bloom filter (programs/keyed_bloom.p4: SipHash-2-4 flow hashes, register reads and
  writes), flows learned and their return traffic checked in turn (`p4sec bench-engines --pipeline keyed-bloom`);
- hash-frames: whole-frame keyed hashing (programs/hash_frames.p4 with SipHash-2-4, 64-byte frames, the digest
  written into the source MAC; the hashing paper's Table III workload; `p4sec bench-engines --pipeline hash-frames`);
- router: the IPv4 LPM router (programs/ipv4_router.p4, 10,000 routes, 64-byte packets; `p4sec bench`).
It prints a row per pipeline with each engine's figure and their ratio. Needs valgrind.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

# the function whose calls are the packets
PROCESS = "Engine>::process"
# the extern interface's calls (crates/externs/src/iface.rs): an extern object's method or a bound call site
EXTERN_CALL = re.compile(r"as p4sec_externs::iface::(BoundCall|ExternObject)>::call$")

PIPELINES = [
    ("esp-enc-null", "IPsec gateway, encapsulation, NULL cipher", ["bench-esp", "--dir", "enc", "--size", "64", "--cipher", "null"]),
    ("esp-dec-null", "IPsec gateway, decapsulation, NULL cipher", ["bench-esp", "--dir", "dec", "--size", "64", "--cipher", "null"]),
    ("esp-enc-aes-gcm", "IPsec gateway, encapsulation, AES-GCM-128", ["bench-esp", "--dir", "enc", "--size", "64"]),
    ("esp-dec-aes-gcm", "IPsec gateway, decapsulation, AES-GCM-128", ["bench-esp", "--dir", "dec", "--size", "64"]),
    ("url-filter", "URL filter, single pass, HTTP/TLS/DNS/SSH", ["bench-engines", "--pipeline", "url-filter"]),
    ("keyed-bloom", "keyed Bloom filter (SipHash-2-4)", ["bench-engines", "--pipeline", "keyed-bloom"]),
    ("hash-frames", "SipHash-2-4 over the whole 64-byte frame", ["bench-engines", "--pipeline", "hash-frames"]),
    ("router", "IPv4 LPM router, 10,000 routes", ["bench", "--routes", "10000"]),
]


def process_cost(text):
    """From a callgrind output file (written with --compress-strings=no): the calls of Engine::process, the
    instructions executed inside them, summed over every place it is called from, and the instructions executed
    in the extern objects' calls made by the engine (EXTERN_CALL called from a file of crates/engine/src,
    inclusive: the ESP framing and cipher, the hashes); the P4 part is the difference. Helpers of the externs'
    crate the engine uses for its own work (the checksum of `update_checksum`) stay in the P4 part."""
    calls = instructions = externs = 0
    lines = text.splitlines()
    here = ""
    for i, line in enumerate(lines):
        if line.startswith(("fl=", "fi=", "fe=")):
            here = line[3:]
        elif line.startswith("cfn=") and i + 2 < len(lines) and lines[i + 1].startswith("calls="):
            cost = lines[i + 2].split()
            inclusive = int(cost[1]) if len(cost) > 1 else 0
            if PROCESS in line:
                calls += int(lines[i + 1].split("=", 1)[1].split()[0])
                instructions += inclusive
            if "/crates/engine/src/" in here and EXTERN_CALL.search(line):
                externs += inclusive
    return calls, instructions, externs


def measure(p4sec, engine, args, packets, tmp):
    """Instructions per packet of `p4sec --engine ENGINE ARGS` in the steady state (see the module's doc)."""
    got = []
    for n in (packets, 2 * packets):
        out = pathlib.Path(tmp) / f"cg.{engine}.{n}.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--compress-strings=no", "--compress-pos=no",
               p4sec, "--engine", engine, *args, "--packets", str(n)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[5:])} failed under callgrind: {r.stderr[-800:]}")
        calls, instructions, externs = process_cost(out.read_text())
        if calls != n:
            raise RuntimeError(f"{' '.join(cmd[5:])}: {calls} calls of Engine::process found, not {n}")
        got.append((calls, instructions, externs))
    (c1, i1, x1), (c2, i2, x2) = got
    return (i2 - i1) / (c2 - c1), (x2 - x1) / (c2 - c1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=2000, help="packets of the shorter run (the longer has twice as many)")
    ap.add_argument("--engines", default="closure,native", help="engines, comma-separated: closure and/or native")
    ap.add_argument("--only", help="the pipelines to measure, comma-separated (default: all)")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"))
    args = ap.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ("closure", "native"):
            ap.error(f"--engines: unknown engine `{e}` (closure or native)")
    if not engines:
        ap.error("--engines: none given")
    if args.packets < 1:
        ap.error("--packets: at least 1")
    names = [p[0] for p in PIPELINES]
    only = [x.strip() for x in args.only.split(",")] if args.only else names
    for x in only:
        if x not in names:
            ap.error(f"--only: unknown pipeline `{x}` ({', '.join(names)})")
    if shutil.which("valgrind") is None:
        sys.exit("bench.instructions: valgrind not found (apt-get install valgrind; scripts/setup installs it)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, what, cmd in PIPELINES:
            if name not in only:
                continue
            row = {"pipeline": name, "what": what}
            for e in engines:
                total, externs = measure(args.p4sec, e, cmd, args.packets, tmp)
                row[f"{e}_instructions_per_packet"] = total
                row[f"{e}_extern_instructions_per_packet"] = externs
                row[f"{e}_p4_instructions_per_packet"] = total - externs
            rows.append(row)
    print(f"instructions per packet through Engine::process (callgrind, steady state: runs of {args.packets} and "
          f"{2 * args.packets} packets, their difference); externs: inside the externs' code (crypto, ESP framing,")
    print("hashes: the same code on both engines); P4 part: the rest")
    both = {"closure", "native"} <= set(engines)
    head = "".join(f"{e + ' all':>13}{'externs':>9}{'P4 part':>9}" for e in engines)
    print(f"  {'pipeline':<44}{head}" + ("  P4 part closure/native" if both else ""))
    for r in rows:
        figures = "".join(f"{r[f'{e}_instructions_per_packet']:>13.0f}{r[f'{e}_extern_instructions_per_packet']:>9.0f}"
                          f"{r[f'{e}_p4_instructions_per_packet']:>9.0f}" for e in engines)
        if both:
            r["native_over_closure"] = r["native_instructions_per_packet"] / r["closure_instructions_per_packet"]
            r["p4_speedup"] = r["closure_p4_instructions_per_packet"] / r["native_p4_instructions_per_packet"]
            figures += f"  {r['p4_speedup']:>22.2f}x"
        print(f"  {r['what']:<44}{figures}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"benchmark": "instructions_per_packet", "packets": args.packets,
                                                       "engines": engines, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    main()
