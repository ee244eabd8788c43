"""What the target HIP version changes in a translation: the rules of ``data/targets.tsv`` (data, not code).

``load_target(version)`` picks the rows that apply to one target (``None``: the newest HIP, i.e. every row with no
upper bound) and gives them as a ``Target``:

- ``headers``: CUDA header -> (the HIP path the target installs, or "" when it has none; the lowest HIP version
  that has one, for the finding's text);
- ``mask64``: the full-wavefront mask when the ``*_sync`` builtins take 64-bit masks only (else ``None``);
- ``sync_define``: the macro without which the target does not declare the ``*_sync`` builtins (else ``None``);
- ``nodiscard``: the type whose discarded results warn (``hipError_t``), ``None`` when not;
  ``nodiscard_exempt``: HIP functions that do not return it;
- ``kernel_args``: HIP function -> (the index of its kernel argument, its fewest and most arguments), for the
  functions that take the kernel as ``const void*`` only (no template overload as CUDA's runtime API has);
- ``header_defines``: HIP header -> the macro that must be defined before it is included (``HIPBLAS_V2``);
- ``name_hazards``: CUDA name -> (why its translation is not faithful everywhere, whether only in device code): a
  hazard at each use, blocking (in files with device code only, for a device-only one);
- ``runtime_includes``: the C/C++ headers CUDA's runtime header includes that the target's does not make usable in
  host code, in the file's order (``RuntimeInclude``: the translation includes them where the runtime is and their
  names are used, tools/hipify/tree.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.errors import ToolError
from tools.hipify.mapping import Version, parse_version

TARGETS_DB = Path(__file__).resolve().parent / "data" / "targets.tsv"
RULES = (
    "header",
    "warp-sync-mask",
    "warp-sync-define",
    "nodiscard",
    "nodiscard-exempt",
    "kernel-arg",
    "header-define",
    "name-hazard",
    "device-name-hazard",
    "runtime-include",
)
_COLUMNS = ("rule", "key", "hip_from", "hip_before", "value", "source")


class RuntimeInclude:
    """A ``runtime-include`` row: ``header`` (``b"string.h"``), ``provided_by`` (it and the other headers whose
    include provides its names: ``b"cstring"``), ``names`` (those whose unqualified use needs it, in the row's
    order; ``name_set``) and ``needles`` (what is looked for: the common prefix of the names that share their first
    three letters, ``mem`` for ``memset`` ... ``memchr``, ``isless`` for ``isless``/``islessequal``: one scan of
    the file each)."""

    __slots__ = ("header", "name_set", "names", "needles", "provided_by")

    def __init__(self, header: str, value: str) -> None:
        words = value.split()
        self.header = header.encode("ascii")
        self.provided_by = frozenset(
            {self.header, *(w[1:-1].encode("ascii") for w in words if w.startswith("<") and w.endswith(">"))}
        )
        self.names = tuple(w.encode("ascii") for w in words if not w.startswith("<"))
        self.name_set = frozenset(self.names)
        groups: dict[bytes, bytes] = {}
        for name in self.names:
            common = groups.setdefault(name[:3], name)
            while not name.startswith(common):
                common = common[:-1]
            groups[name[:3]] = common
        self.needles = tuple(groups.values())


class Target:
    """The target-dependent rules for one HIP version (plain class: cheap to import)."""

    __slots__ = (
        "header_defines",
        "headers",
        "kernel_args",
        "mask64",
        "name_hazards",
        "nodiscard",
        "nodiscard_exempt",
        "runtime_includes",
        "sync_define",
        "version",
    )

    def __init__(self, version: Version | None) -> None:
        self.version = version
        self.headers: dict[str, tuple[str, Version | None]] = {}
        self.mask64: str | None = None
        self.sync_define: str | None = None
        self.nodiscard: str | None = None
        self.nodiscard_exempt: frozenset[str] = frozenset()
        self.kernel_args: dict[str, tuple[int, int, int]] = {}
        self.header_defines: dict[str, str] = {}
        self.name_hazards: dict[str, tuple[str, bool]] = {}
        self.runtime_includes: tuple[RuntimeInclude, ...] = ()

    def describe(self) -> dict[str, object]:
        """For the report: what this target changes (see docs/hipify.md, "Targets")."""
        if self.mask64 is None:
            warp = "mask-less forms (HIP < 6.2: downgrades.tsv)"
        elif self.sync_define is not None:
            warp = f"64-bit masks; {self.sync_define} defined by the translation"
        else:
            warp = "64-bit masks"
        return {
            "warp_sync": warp,
            "full_mask": self.mask64 or "",
            "sync_define": self.sync_define or "",
            "nodiscard": self.nodiscard or "",
            "header_defines": ", ".join(f"{m} before <{h}>" for h, m in sorted(self.header_defines.items())),
        }


def _applies(version: Version | None, start: Version | None, before: Version | None) -> bool:
    if version is None:  # the newest HIP: rows without an upper bound
        return before is None
    v = version[:2]
    return (start is None or start[:2] <= v) and (before is None or v < before[:2])


def read_rows(path: Path = TARGETS_DB) -> list[tuple[str, str, Version | None, Version | None, str]]:
    """The rows of the targets file: (rule, key, hip_from, hip_before, value). A bad row is a ToolError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ToolError(f"cannot read {path}: {err.strerror or err}") from None
    rows: list[tuple[str, str, Version | None, Version | None, str]] = []
    header_seen = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if not header_seen:
            if tuple(cells) != _COLUMNS:
                raise ToolError(f"{path}:{lineno}: the header row must be {' '.join(_COLUMNS)}")
            header_seen = True
            continue
        if len(cells) != len(_COLUMNS) or cells[0] not in RULES or not cells[1]:
            raise ToolError(
                f"{path}:{lineno}: bad row {line!r} (want {len(_COLUMNS)} tab-separated cells, rule one of "
                f"{', '.join(RULES)}, a key)"
            )
        if cells[0] == "kernel-arg" and _kernel_arg(cells[4]) is None:
            raise ToolError(
                f"{path}:{lineno}: bad kernel-arg value {cells[4]!r} (want the argument's index and the arity, "
                "e.g. '0 3' or '0 4-6')"
            )
        if cells[0] in ("header-define", "name-hazard", "device-name-hazard") and not cells[4]:
            raise ToolError(f"{path}:{lineno}: a {cells[0]} row needs a value")
        if cells[0] == "runtime-include" and not _runtime_include_ok(cells[1], cells[4]):
            raise ToolError(
                f"{path}:{lineno}: bad runtime-include row {line!r} (want a header as key and, as value, the names "
                "that need it, as C identifiers, and the other headers that provide them as <header>)"
            )
        rows.append((cells[0], cells[1], parse_version(cells[2]), parse_version(cells[3]), cells[4]))
    return rows


def _runtime_include_ok(header: str, value: str) -> bool:
    words = value.split()
    spelled = re.compile(r"<[\w./+-]+>\Z")
    names = [w for w in words if not spelled.match(w)]
    return (
        bool(re.fullmatch(r"[\w./+-]+", header))
        and bool(names)
        and all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names)
        and value.isascii()
        and header.isascii()
    )


def _kernel_arg(value: str) -> tuple[int, int, int] | None:
    """``"1 2"`` -> (1, 2, 2); ``"0 4-6"`` -> (0, 4, 6): the kernel argument's index, the fewest and most arguments."""
    parts = value.split()
    if len(parts) != 2 or not parts[0].isdigit():
        return None
    low, _, high = parts[1].partition("-")
    if not low.isdigit() or (high and not high.isdigit()):
        return None
    index, fewest, most = int(parts[0]), int(low), int(high or low)
    return (index, fewest, most) if index < fewest <= most else None


def load_target(version: Version | None, path: Path = TARGETS_DB) -> Target:
    target = Target(version)
    lowest: dict[str, Version] = {}  # header -> the lowest version that has a HIP path
    exempt: set[str] = set()
    runtime_includes: list[RuntimeInclude] = []
    for rule, key, start, before, value in read_rows(path):
        if rule == "header" and value and start is not None:
            if key not in lowest or start < lowest[key]:
                lowest[key] = start
        if not _applies(version, start, before):
            continue
        if rule == "header":
            target.headers[key] = (value, None)
        elif rule == "warp-sync-mask":
            target.mask64 = value
        elif rule == "warp-sync-define":
            target.sync_define = key
        elif rule == "nodiscard":
            target.nodiscard = key
        elif rule == "nodiscard-exempt":
            exempt.add(key)
        elif rule == "kernel-arg":
            arg = _kernel_arg(value)
            assert arg is not None  # checked by read_rows
            target.kernel_args[key] = arg
        elif rule == "header-define":
            target.header_defines[key] = value
        elif rule == "runtime-include":
            runtime_includes.append(RuntimeInclude(key, value))
        else:  # several rows for one name: every reason (device-only when every one is)
            device_only = rule == "device-name-hazard"
            known = target.name_hazards.get(key)
            why = value if known is None else f"{known[0]}; and {value}"
            target.name_hazards[key] = (why, device_only and (known is None or known[1]))
    target.headers = {key: (value, lowest.get(key)) for key, (value, _) in target.headers.items()}
    target.nodiscard_exempt = frozenset(exempt)
    target.runtime_includes = tuple(runtime_includes)
    return target
