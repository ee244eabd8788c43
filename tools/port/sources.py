"""Which files a port covers (the given ones and the project headers they include), and staging them.

hipify_tree mirrors directory roots into one output directory and rewrites includes between the files it
translates. To hipify "these files and the headers they include" (and nothing else), the files are copied
into a staging directory, one sub-directory per source root, and that staging tree is hipified. The
``Staged`` object maps every staged copy back to its original, so findings and compiler messages name the
files the user edits.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.errors import ToolError

#: what the build compiles (build_backend/hipify_stage.py); everything else is a header or data
COMPILE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".hip")
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\r\n]+)"', re.M)
_SKIP_DIRS = frozenset({"__pycache__", "build", "target"})


def _abs(path: Path) -> Path:
    return Path(os.path.normpath(os.path.abspath(path)))


def _within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def quoted_includes(data: bytes) -> list[str]:
    """The ``#include "..."`` spellings of a file (angled includes are system headers)."""
    return [m.group(1).decode("latin-1") for m in _INCLUDE.finditer(data)]


def resolve_includes(files: Sequence[Path], include_dirs: Sequence[Path]) -> list[Path]:
    """``files`` plus every project header they include, transitively: a quoted include is looked up
    next to its includer, then in ``include_dirs`` (the project's, as the build passes with -I).
    Includes found nowhere (system or toolkit headers) are left to the compiler."""
    seen: dict[Path, None] = {}
    todo = [_abs(f) for f in files]
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen[path] = None
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for spelling in quoted_includes(data):
            for base in (path.parent, *include_dirs):
                candidate = _abs(base / spelling)
                if candidate.is_file():
                    todo.append(candidate)
                    break
    return list(seen)


def tree_files(root: Path) -> list[Path]:
    """Every file under ``root`` (hidden entries and build outputs skipped), sorted."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        out += [Path(dirpath) / name for name in sorted(filenames) if not name.startswith(".")]
    return out


def _roots(files: Iterable[Path], preferred: Sequence[Path]) -> list[Path]:
    """Source roots: the preferred ones (the project include dirs) and each file's directory, minus any
    root inside another (so a relative include between them keeps working)."""
    candidates = [_abs(p) for p in preferred] + [f.parent for f in files]
    unique = list(dict.fromkeys(candidates))
    return [r for r in unique if not any(r != o and _within(r, o) for o in unique)]


@dataclass
class Staged:
    """Staged copies of the sources: ``origin`` maps each staged path to the original file."""

    stage_dir: Path
    roots: list[Path]  # staged root directories, passed to hipify_tree
    origin: dict[Path, Path] = field(default_factory=dict)
    staged_of: dict[Path, Path] = field(default_factory=dict)  # original -> staged

    def original(self, staged: Path) -> Path:
        return self.origin.get(_abs(staged), staged)


def stage(files: Sequence[Path], include_dirs: Sequence[Path], stage_dir: Path) -> Staged:
    """Copy ``files`` (already include-resolved) under ``stage_dir``, one sub-directory per root."""
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ToolError(f"not a file: {', '.join(missing)}")
    absolute = [_abs(f) for f in files]
    roots = _roots(absolute, [d for d in include_dirs if any(_within(f, _abs(d)) for f in absolute)])
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    staged = Staged(stage_dir, [])
    used: dict[Path, Path] = {}
    for path in absolute:
        root = next(r for r in roots if _within(path, r))
        if root not in used:
            used[root] = stage_dir / f"r{len(used)}"
        target = used[root] / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        staged.origin[target] = path
        staged.staged_of[path] = target
    staged.roots = list(used.values())
    return staged
