"""`--compare LABEL=PATH` of the benchmarks that take turns with other p4sec builds (bench.veth,
bench.router_builds): each spec checked and split into its label and binary."""
import pathlib


def compared(specs, taken, parser):
    """(label, path) of each `LABEL=PATH` in `specs`, in order; `taken`: labels already in use. A malformed spec,
    a path that is not a file or a label used twice is refused through `parser.error` (exit status 2)."""
    out = []
    taken = list(taken)
    for c in specs:
        label, sep, path = c.partition("=")
        if not sep or not label or not path:
            parser.error(f"--compare: `{c}` is not LABEL=PATH")
        if not pathlib.Path(path).is_file():
            parser.error(f"--compare: `{path}` is not a file")
        if label in taken:
            parser.error(f"--compare: the label `{label}` is taken")
        taken.append(label)
        out.append((label, path))
    return out
