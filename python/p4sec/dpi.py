"""Blocklist compiler for URL filtering in the data plane (DeeP4R): domain names into a DFA whose transitions
are match-action table entries.

    p4sec-dpi compile LIST [--json OUT] [--entries OUT]

The DFA is Aho-Corasick over the patterns "." + domain + END with every failure link folded into a complete
transition function, so overlapping and partially matching names are never missed (a table that resets to
the start state after a false start, as in the DeeP4R paper, misses "evil.com" in "eevil.com"-like inputs
whose prefix looked like another name; see tests/dpi). The scanned string is "." + hostname + END:

- bytes are folded to symbol classes first (byte_class): letters case-insensitively, digits, '-', '.',
  and END for any byte that ends a name (CR, LF, ':', '/', space, NUL...);
- DNS query names (length-prefixed labels) map their length bytes to '.', so the same DFA applies;
- matching is bound to labels: blocking "evil.com" blocks "evil.com" and "www.evil.com" but not
  "notevil.com" or "evil.com.example".

Transitions to the start state are not emitted (it is the table's default action), so the table holds one
entry per (state, class) pair that leads elsewhere.
"""
import argparse
import json
import sys
import time
from collections import deque

# symbol classes: 0 = END, 1 = '.', 2 = '-', 3..12 = digits, 13..38 = letters
END, DOT, DASH = 0, 1, 2
N_CLASSES = 39


def byte_class(b):
    """Symbol class of a byte, or None for bytes that cannot appear in a host name (they end it: END)."""
    if 0x61 <= b <= 0x7A:
        return 13 + b - 0x61
    if 0x41 <= b <= 0x5A:
        return 13 + b - 0x41
    if 0x30 <= b <= 0x39:
        return 3 + b - 0x30
    if b == 0x2E:
        return DOT
    if b == 0x2D:
        return DASH
    return END


CLASS_OF = [byte_class(b) for b in range(256)]
# DNS query names: each label's length byte (1..63) acts as the dot before the label; 0 ends the name
CLASS_OF_DNS = [DOT if 1 <= b <= 63 else (END if b == 0 else byte_class(b)) for b in range(256)]


class BlocklistError(ValueError):
    pass


def normalize(name, where="domain"):
    """A domain name in the lower-case ASCII (IDNA) form the DFA matches."""
    name = name.strip().rstrip(".")
    if name.startswith("*."):
        name = name[2:]  # "*.evil.com" blocks what "evil.com" blocks (subdomains included)
    if not name:
        raise BlocklistError(f"{where}: empty name")
    for label in name.split("."):
        if not label:
            raise BlocklistError(f"{where}: `{name}` has an empty label")
        if len(label) > 63:
            raise BlocklistError(f"{where}: `{name}` has a label longer than 63 characters")
    try:
        ascii_name = name.encode("idna").decode("ascii").lower()
    except UnicodeError as e:
        raise BlocklistError(f"{where}: `{name}` is not a valid domain name ({e})") from None
    for label in ascii_name.split("."):
        if not label:
            raise BlocklistError(f"{where}: `{name}` has an empty label")
        if len(label) > 63:
            raise BlocklistError(f"{where}: `{name}` has a label longer than 63 characters")
        bad = [c for c in label if byte_class(ord(c)) in (END, DOT)]
        if bad:
            raise BlocklistError(f"{where}: `{name}` contains `{bad[0]}`, which cannot appear in a host name")
    if len(ascii_name) > 253:
        raise BlocklistError(f"{where}: `{name}` is longer than 253 characters")
    return ascii_name


def read_list(text, source="list"):
    """Domain names from a list: one per line, `#` comments, blank lines ignored; duplicates removed."""
    out, seen = [], set()
    for no, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if len(line.split()) != 1:
            raise BlocklistError(f"{source}:{no}: one domain per line, got `{line}`")
        d = normalize(line, f"{source}:{no}")
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def symbols(domain):
    return [DOT] + [CLASS_OF[ord(c)] for c in domain] + [END]


class Dfa:
    """Aho-Corasick automaton over symbol classes with complete (failure-folded) transitions.

    State 0 is the start state; `accept` holds the states reached right after a blocked name ended.
    `delta[s]` maps a class to the next state for every class whose next state is not 0.
    """

    def __init__(self, domains, payload=False):
        """With `payload`, names are also matched after any byte that cannot be part of a host name (END), as
        when scanning whole payloads (HTTP headers, TLS ClientHello) rather than a bare host name."""
        goto = [{}]
        out = [None]
        patterns = [symbols(d) for d in domains]
        if payload:
            patterns += [[END] + symbols(d)[1:] for d in domains]
        for i, pat in enumerate(patterns):
            s = 0
            for c in pat:
                nxt = goto[s].get(c)
                if nxt is None:
                    nxt = len(goto)
                    goto[s][c] = nxt
                    goto.append({})
                    out.append(None)
                s = nxt
            out[s] = i
        n = len(goto)
        fail = [0] * n
        delta = [None] * n
        delta[0] = dict(goto[0])
        accept = [o is not None for o in out]
        q = deque()
        for c, s in goto[0].items():
            fail[s] = 0
            q.append(s)
        while q:
            s = q.popleft()
            # complete transitions: the failure state's, overridden by our own gotos
            f = fail[s]
            d = dict(delta[f])
            d.update(goto[s])
            if accept[f]:
                accept[s] = True
            delta[s] = d
            for c, t in goto[s].items():
                fail[t] = delta[f].get(c, 0)
                q.append(t)
        # blocked states are absorbing: once a listed name has been seen, the verdict is fixed
        for s in range(n):
            if accept[s]:
                delta[s] = {c: s for c in range(N_CLASSES)}
        self.delta = delta
        self.accept = accept
        self.domains = domains
        self.payload = payload

    @property
    def states(self):
        return len(self.delta)

    def entries(self):
        """(state, class, next state, blocked) for every transition that does not lead to the start state."""
        for s, d in enumerate(self.delta):
            for c, t in d.items():
                if t != 0:
                    yield s, c, t, self.accept[t]

    def run(self, data, dns=False):
        """Scan bytes as the data plane does ("." + data, ended by END; for a DNS query name in wire format the
        length bytes are the dots); True when a listed name occurs."""
        classes = CLASS_OF_DNS if dns else CLASS_OF
        s = 0 if dns else self.delta[0].get(END if self.payload else DOT, 0)
        for b in data:
            s = self.delta[s].get(classes[b], 0)
            if self.accept[s]:
                return True
        s = self.delta[s].get(END, 0)
        return self.accept[s]


def automaton_json(dfa):
    """The automaton in the form the `dfa_matcher` extern loads (mode 0: text, mode 1: DNS wire format)."""
    start_text = dfa.delta[0].get(END if dfa.payload else DOT, 0)
    return json.dumps({
        "states": dfa.states,
        "classes": N_CLASSES,
        "end_class": END,
        "modes": [[CLASS_OF, start_text], [CLASS_OF_DNS, 0]],
        "transitions": [[s, c, t] for s, c, t, _ in dfa.entries()],
        "accept": [s for s, a in enumerate(dfa.accept) if a],
    }, separators=(",", ":"))


def reset_to_start_dfa(domains):
    """The DeeP4R paper's table: a trie whose mismatches go back to the start state (kept for comparison)."""
    goto, acc = [{}], [False]
    for d in domains:
        s = 0
        for c in symbols(d):
            if c not in goto[s]:
                goto[s][c] = len(goto)
                goto.append({})
                acc.append(False)
            s = goto[s][c]
        acc[s] = True

    def run(data):
        s = goto[0].get(DOT, 0)
        for b in list(data) + [None]:
            c = END if b is None else CLASS_OF[b]
            s = goto[s].get(c, goto[0].get(c, 0))
            if acc[s]:
                return True
        return False
    return run


def report(dfa, seconds):
    n = sum(1 for _ in dfa.entries())
    state_bits = max(1, (dfa.states - 1).bit_length())
    # key: state + class (6 bits); action data: next state + verdict bit
    entry_bits = state_bits + 6 + state_bits + 1
    return {
        "domains": len(dfa.domains),
        "states": dfa.states,
        "entries": n,
        "state_bits": state_bits,
        "memory_bytes": (n * entry_bits + 7) // 8,
        "compile_seconds": seconds,
    }


def p4runtime_entries(dfa, table="UfrIngress.dfa", action="UfrIngress.step"):
    """Entries of programs/url_filter.p4's DFA table for p4sec.runtime.Switch.table_insert:
    key (hdr.label.state, meta.cls) -> step(next, blocked)."""
    for s, c, t, blocked in dfa.entries():
        yield table, {"hdr.label.state": ("exact", s.to_bytes(4, "big")), "meta.cls": ("exact", bytes([c]))}, action, {"next": t, "blocked": int(blocked)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-dpi", description="URL-filter blocklist compiler")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile a domain list into DFA table entries")
    c.add_argument("list")
    c.add_argument("--json", help="write the report as JSON")
    c.add_argument("--entries", help="write the table entries as JSON lines (state, class, next, blocked)")
    c.add_argument("--automaton", help="write the automaton for the dfa_matcher extern (payload scanning) as JSON")
    b = sub.add_parser("bench", help="compile generated lists of 1,000 to 100,000 domains and print the figures")
    b.add_argument("--sizes", default="1000,5000,100000")
    b.add_argument("--json")
    args = ap.parse_args(argv)
    if args.cmd == "bench":
        return bench([int(x) for x in args.sizes.split(",")], args.json)
    try:
        with open(args.list, encoding="utf-8") as f:
            domains = read_list(f.read(), args.list)
    except (OSError, BlocklistError) as e:
        print(f"p4sec-dpi: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    dfa = Dfa(domains)
    rep = report(dfa, time.perf_counter() - t0)
    print(f"{rep['domains']} domains -> {rep['states']} states, {rep['entries']} table entries, "
          f"{rep['memory_bytes'] / 1024:.1f} KiB ({rep['state_bits']}-bit states), compiled in {rep['compile_seconds']:.2f} s")
    if args.automaton:
        with open(args.automaton, "w") as f:
            f.write(automaton_json(Dfa(domains, payload=True)))
    if args.entries:
        with open(args.entries, "w") as f:
            for s, cl, t, b in dfa.entries():
                f.write(json.dumps([s, cl, t, int(b)]) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=2)
    return 0


def generated_domains(n, seed=1):
    """n distinct plausible domain names (2-3 labels, shared TLDs and overlapping words)."""
    import random
    rnd = random.Random(seed)
    words = ["shop", "mail", "cdn", "secure", "login", "bank", "news", "cloud", "app", "web", "free", "best", "my", "online"]
    tlds = ["com", "net", "org", "io", "de", "info", "xyz", "co.uk"]
    out, seen = [], set()
    while len(out) < n:
        w = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rnd.randint(3, 10)))
        name = f"{rnd.choice(words)}{w}.{rnd.choice(tlds)}" if rnd.random() < 0.6 else f"{w}.{rnd.choice(words)}.{rnd.choice(tlds)}"
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def bench(sizes, json_path=None):
    rows = []
    print("p4sec-dpi bench: Aho-Corasick DFA from generated domain lists (one process)")
    print(f"  {'domains':>8} {'states':>10} {'entries':>10} {'memory':>10} {'seconds':>8}")
    for n in sizes:
        doms = generated_domains(n)
        t0 = time.perf_counter()
        dfa = Dfa(doms)
        rep = report(dfa, time.perf_counter() - t0)
        rows.append(rep)
        print(f"  {n:>8} {rep['states']:>10} {rep['entries']:>10} {rep['memory_bytes'] / 2**20:>8.1f}MiB {rep['compile_seconds']:>8.2f}")
        del dfa
    print("  targets: 5,000 domains in seconds, 100,000 in under a minute")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"benchmark": "dpi_compile", "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
