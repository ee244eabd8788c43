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
from pathlib import Path, PurePosixPath

from tools.errors import ToolError
from tools.hipify.tree import is_system_header

#: what the build compiles (build_backend/hipify_stage.py); everything else is a header or data
COMPILE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".hip")
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\r\n]+)[>"]', re.M)
_SKIP_DIRS = frozenset({"__pycache__", "build", "target"})


def _abs(path: Path) -> Path:
    return Path(os.path.normpath(os.path.abspath(path)))


def _within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def includes_of(data: bytes) -> list[tuple[str, bool]]:
    """Every ``#include`` of a file: (spelling, whether it is ``<angled>``), in order."""
    return [(m.group(2).decode("latin-1"), m.group(1) == b"<") for m in _INCLUDE.finditer(data)]


def resolve_includes(files: Sequence[Path], include_dirs: Sequence[Path]) -> list[Path]:
    """``files`` plus every project header they include, transitively, looked up as the compiler does with
    ``include_dirs`` given with -I (the user's, then the project's csrc/): a quoted include next to its includer,
    then in ``include_dirs``; an angled one in ``include_dirs`` only, unless it names a C/C++/POSIX system
    header. Includes found nowhere (system or toolkit headers) are left to the compiler."""
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
        for spelling, angled in includes_of(data):
            if angled and is_system_header(spelling):
                continue
            for base in (*([] if angled else [path.parent]), *include_dirs):
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
    root_of: dict[Path, Path] = field(default_factory=dict)  # original source root -> its staged directory

    def original(self, staged: Path) -> Path:
        return self.origin.get(_abs(staged), staged)

    def within_root(self, directory: Path) -> tuple[Path, PurePosixPath] | None:
        """(the staged root, the path inside it) of an original directory under a source root; None when no
        staged file came from a root holding it."""
        directory = _abs(directory)
        for original, staged_root in self.root_of.items():
            if _within(directory, original):
                return staged_root, PurePosixPath(directory.relative_to(original).as_posix())
        return None


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
    staged.root_of = dict(used)
    return staged
