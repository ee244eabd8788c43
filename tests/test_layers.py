"""Every import arrow points down (docs/design.md, "Layers").

The layers, bottom first, are the data below. A module may import its own layer or a lower one, never a
higher one; inside a layer the imports must not form a cycle (a cycle is an arrow that points up whatever
the order). Every import counts: at module level, inside functions (the lazy ones that keep start-up fast)
and under ``if TYPE_CHECKING:``. The runtime package that ships in the wheels (python/monarch_runtime)
imports nothing of the build. Two tests plant an upward import and a cycle in a copy of the tree and check
that the rule reports them, with file and line.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from _support import ROOT

# Bottom first. A module's layer is that of the longest prefix naming it; a package's __init__ belongs to
# the package's own layer (it may import its submodules).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("buildcore.errors",),
    ("buildcore.process", "buildcore.settings", "buildcore.kernels"),
    ("buildcore.toolchain",),
    ("buildcore",),
    ("tools.errors",),
    ("tools.hipify",),
    ("tools.gen_compat", "tools.port"),
    ("tools",),
    ("build_backend",),
    ("ci", "bench"),
)
PACKAGES = ("buildcore", "tools", "build_backend", "ci", "bench")
RUNTIME = Path("python") / "monarch_runtime"


@dataclass(frozen=True)
class Arrow:
    source: str  # module
    target: str  # module
    where: str  # path:line


def module_name(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path.relative_to(root))] = path
    return found


def imported(node: ast.AST, module: str, is_package: bool, known: Collection[str]) -> list[str]:
    """The modules one import statement reaches: ``from a import b`` reaches a.b when that is a module,
    else a (b is a name defined there). Running a package's __init__ on the way is the package's business."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]


def arrows(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Arrow]:
    known = modules(root, packages)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found: list[Arrow] = []
    for module, path in known.items():
        tree = ast.parse(path.read_bytes(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = {resolve(name) for name in imported(node, module, path.name == "__init__.py", known)}
            where = f"{path.relative_to(root)}:{node.lineno}"
            found += [Arrow(module, t, where) for t in sorted(t for t in targets if t and t != module)]
    return found


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, rank = len(name), index
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS (and to docs/design.md)"
    return rank


def upward(found: list[Arrow]) -> list[str]:
    return [
        f"{a.where}: {a.source} imports {a.target}, a higher layer"
        for a in found
        if layer_of(a.target) > layer_of(a.source)
    ]


def cycles(found: list[Arrow]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    graph: dict[str, set[str]] = {}
    for a in found:
        graph.setdefault(a.source, set()).add(a.target)
        graph.setdefault(a.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def test_every_import_points_down() -> None:
    found = arrows(ROOT)
    assert len(found) > 100, "the scan found too few imports: is it reading the tree?"
    assert upward(found) == []


def test_no_import_cycle() -> None:
    assert cycles(arrows(ROOT)) == []


def test_runtime_imports_nothing_of_the_build() -> None:
    build = set(PACKAGES)
    bad = []
    for path in sorted((ROOT / RUNTIME).rglob("*.py")):
        module = module_name(path.relative_to(ROOT / "python"))
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "level", 0) == 0:
                names = imported(node, module, path.name == "__init__.py", ())
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in build]
    assert bad == []


def copy_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_a_planted_upward_import_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    rocm = root / "buildcore" / "toolchain" / "rocm.py"
    lines = rocm.read_text(encoding="utf-8").count("\n")
    # function-local, as the lazy imports are: the kind that hid the old arrows
    rocm.write_text(
        rocm.read_text(encoding="utf-8") + "\n\ndef _planted() -> None:\n    from build_backend import pipeline\n",
        encoding="utf-8",
    )
    assert upward(arrows(root)) == [
        f"buildcore/toolchain/rocm.py:{lines + 4}: buildcore.toolchain.rocm imports build_backend.pipeline, "
        "a higher layer"
    ]


def test_a_planted_cycle_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    mapping = root / "tools" / "hipify" / "mapping.py"  # translate.py imports it
    mapping.write_text(
        mapping.read_text(encoding="utf-8") + "\n\ndef _planted() -> None:\n    import tools.hipify.translate\n",
        encoding="utf-8",
    )
    found = arrows(root)
    assert upward(found) == []  # the same layer: only the cycle tells
    assert any({"tools.hipify.mapping", "tools.hipify.translate"} <= set(c) for c in cycles(found))
