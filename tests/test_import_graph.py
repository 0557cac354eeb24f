"""No import cycles in beam_sft: the graph of every import (module level and inside functions alike,
read with ``ast``, so a cycle hidden behind a function-level import counts) has no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "beam_sft"

# Cycles that other work in flight removes; each must still exist (remove it here once it is gone).
KNOWN_CYCLES: set[frozenset[str]] = set()


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies inside."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from pkg import sub`` imports the submodule when there is one, else a name of pkg
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in targets:
                resolved = _resolve(target, known)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    # beam_sft.prepare.shards imports the pipeline only inside merge_shards
    assert "beam_sft.prepare.pipeline" in graph["beam_sft.prepare.shards"]
    assert "beam_sft.compat.chat_template" in graph["beam_sft.encode.select"]


def test_the_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    found = {frozenset(c) for c in cycles(import_graph())}
    unexpected = [sorted(c) for c in found - KNOWN_CYCLES]
    assert not unexpected, f"import cycles: {unexpected}"
    gone = [sorted(c) for c in KNOWN_CYCLES - found]
    assert not gone, f"these known cycles are gone: remove them from KNOWN_CYCLES: {gone}"


README = PACKAGE_ROOT.parent / "README.md"


def readme_layers() -> dict[str, int]:
    """The README's layer list (its layout section): top-level part -> layer number (1 = lowest).

    The README is the one place the layers are stated; this test reads them from there."""
    text = README.read_text(encoding="utf-8")
    start = text.index("Layers, lowest first")
    block = text[text.index("```text\n", start) + len("```text\n"):]
    block = block[:block.index("```")]
    out: dict[str, int] = {}
    for line in block.splitlines():
        match = re.match(r"layer (\d+)\s+(.*?)(\s+\(.*\))?$", line.strip())
        assert match, f"README layer line not understood: {line!r}"
        for part in match.group(2).split(","):
            assert part.strip() not in out, f"{part.strip()} is on two layers in the README"
            out[part.strip()] = int(match.group(1))
    return out


def _part(module: str) -> str:
    """``beam_sft.prepare.pipeline`` -> ``prepare``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward_imports(graph: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """Every import from a module to one on a higher layer, as ``importer -> imported (n -> m)``."""
    out = []
    for name in sorted(graph):
        for target in sorted(graph[name]):
            low, high = layers[_part(name)], layers[_part(target)]
            if high > low:
                out.append(f"{name} -> {target} (layer {low} -> {high})")
    return out


def test_every_part_of_the_package_is_on_one_readme_layer():
    layers = readme_layers()
    parts = {_part(name) for name in modules()}
    assert parts == set(layers), (f"not on a README layer: {sorted(parts - set(layers))}; "
                                  f"on a layer but not in the package: {sorted(set(layers) - parts)}")


def test_no_import_runs_up_the_layers():
    found = upward_imports(import_graph(), readme_layers())
    assert not found, "imports up the README's layers:\n" + "\n".join(found)


def test_the_layer_rule_finds_a_planted_upward_import():
    graph = import_graph()
    layers = readme_layers()
    # dataset_folder/ (the contract) importing prepare/ (the orchestrator above it) is the kind of edge the rule forbids
    planted = {name: set(targets) for name, targets in graph.items()}
    planted["beam_sft.dataset_folder.report_json"].add("beam_sft.prepare.pipeline")
    assert upward_imports(planted, layers) == [
        f"beam_sft.dataset_folder.report_json -> beam_sft.prepare.pipeline "
        f"(layer {layers['dataset_folder']} -> {layers['prepare']})"]
