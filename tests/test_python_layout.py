"""The layout of the Python package (python/p4sec), as scripts/check-layout checks the crates': no module imports
a module that imports it back (directly or through others; imports inside functions count too, so a cycle cannot
hide behind a late import), and every module says what it is in a docstring."""
import ast

from conftest import ROOT

PACKAGE = ROOT / "python" / "p4sec"


def modules():
    """{dotted name: path} of every module of the package."""
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imports(mods):
    """{module: {(imported module, line)}}: the package's modules each one imports, wherever the import is."""
    out = {}
    for name, f in mods.items():
        deps = set()
        for n in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(n, ast.Import):
                deps |= {(a.name, n.lineno) for a in n.names if a.name in mods}
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                if n.module in mods:
                    deps.add((n.module, n.lineno))
                deps |= {(f"{n.module}.{a.name}", n.lineno) for a in n.names if f"{n.module}.{a.name}" in mods}
        out[name] = {(d, line) for d, line in deps if d != name and not name.startswith(d + ".")}
    return out


def cycles(graph):
    """The cycles of `graph` ({node: {(node, line)}}), one path per strongly connected component (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w, _ in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {("b", 1)}, "b": {("c", 2)}, "c": {("a", 3)}, "d": {("a", 4)}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {("b", 1)}, "b": set()}) == []


def test_no_module_of_the_package_imports_itself_back():
    mods = modules()
    assert "p4sec.ipsec.controller" in mods and "p4sec.ipsec.recovery" in mods
    graph = imports(mods)
    assert any(d == "p4sec.ipsec.recovery" for d, _ in graph["p4sec.ipsec.controller"])     # the finder sees imports
    found = cycles(graph)
    described = ["; ".join(f"{m} imports {d} (line {line})" for m in comp for d, line in sorted(graph[m]) if d in comp)
                 for comp in found]
    assert not found, described


def test_every_module_has_a_docstring():
    missing = [str(f.relative_to(ROOT)) for f in modules().values() if not ast.get_docstring(ast.parse(f.read_text()))]
    assert not missing, f"modules without a docstring: {missing}"
