"""The plan of the native fast path: what ``python -m tools hipify`` needs to run entirely in Rust
(rust/hipify_native, engine/tree_plan.rs), derived here by the Python code that stays the reference.

A plan holds, for one set of options: the state fingerprint exactly as tree.py builds it, the report's database
and target descriptions and the target's warp-sync macro; the lint's section (``lint.export_plan()``); the
per-file pass's (``Translator.export_plan()``). It is stored in the compiled cache directory
(tools/hipify/cache.py's ``cache_dir()``) under a name the Rust side computes from the command line alone
(``plan_key``: this checkout's ``tools`` directory, the HIP version given or detected, the override file, the
options that change a translation), as four lines of JSON: a header naming every input the plan was derived
from with its stat signature (this package's code and data, the override file), then the three sections
(the Rust side parses the last two in threads while it reads the inputs).

A *detect file* beside it holds what target detection needs (buildcore/toolchain/rocm.py's environment
variables, fallback roots and version files), so the Rust side detects the default target as rocm.py does
without a second copy of that data.

A plan or detect file that is missing, stale (an input's signature changed) or unreadable makes the fast
path leave the run to Python, which then writes it again (``refresh``, called by cli.py after a run).
"""

from __future__ import annotations

import json
import os

from tools.hipify import cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tools.hipify.model import HipifyOptions

PLAN_FORMAT = "monarch-runtime/hipify-plan/v2"
DETECT_FORMAT = "monarch-runtime/hipify-detect/v1"
_HERE = os.path.dirname(os.path.abspath(__file__))
#: the ``tools`` package's directory (plans are per checkout; tools/__main__.py passes the same path)
TOOLS_DIR = os.path.dirname(_HERE)
_REPO = os.path.dirname(TOOLS_DIR)

Signature = tuple[int, int, int, int, int]


def plan_key(
    hip_version: tuple[int, int] | None,
    overrides: str | None,
    *,
    comments: bool,
    unmapped: bool,
    launch: bool,
    lint: bool,
) -> str:
    """What a plan is stored under (engine/tree_plan.rs's ``plan_key``, from the command line alone)."""
    hip = f"{hip_version[0]}.{hip_version[1]}" if hip_version else "-"
    flags = "\0".join("1" if flag else "0" for flag in (comments, unmapped, launch, lint))
    return f"{PLAN_FORMAT}\0{TOOLS_DIR}\0{hip}\0{overrides or ''}\0{flags}"


def entry_name(prefix: str, key: str) -> str:
    return f"{prefix}-{cache.sha256_hex(key.encode())[:24]}.json"


def _signature(path: str) -> Signature | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def plan_inputs(overrides: str | None) -> list[str]:
    """Everything a plan is derived from: this package's code and data (and the directories, for added or
    removed files), and the override file."""
    data = os.path.join(_HERE, "data")
    try:
        names = sorted(n for n in os.listdir(_HERE) if n.endswith(".py"))
        data_names = sorted(os.listdir(data))
    except OSError:
        names, data_names = [], []
    paths = [_HERE, data]
    paths += [os.path.join(_HERE, n) for n in names]
    paths += [os.path.join(data, n) for n in data_names]
    if overrides:
        paths.append(overrides)
    # the native module's sources: a plan records their fingerprint (native_sources), so an edit makes it stale
    native = native_files()
    if native:
        paths += [NATIVE_DIR, os.path.join(NATIVE_DIR, "src")]
        paths += [os.path.join(NATIVE_DIR, rel) for rel in native]
    return paths


NATIVE_DIR = os.path.join(_REPO, "rust", "hipify_native")


def native_files(crate: str = NATIVE_DIR) -> list[str]:
    """The native module's sources in this checkout (relative, sorted), or [] without them."""
    src = os.path.join(crate, "src")
    if not os.path.isdir(src):
        return []
    files = ["Cargo.toml", "build.rs"]
    for dirpath, _dirs, names in os.walk(src):
        rel_dir = os.path.relpath(dirpath, crate).replace(os.sep, "/")
        files += [f"{rel_dir}/{n}" for n in names if n.endswith(".rs")]
    return sorted(files)


def native_sources(crate: str = NATIVE_DIR) -> str | None:
    """The fingerprint of the native module's sources in this checkout, as rust/hipify_native/build.rs computes
    it into the module (CRC-32 and length of: relative path, NUL, contents, NUL, for each file in sorted path
    order); None without them. A module built from other sources does not take the fast path."""
    import zlib  # noqa: PLC0415

    files = native_files(crate)
    if not files:
        return None
    crc = 0
    length = 0
    for rel in files:
        try:
            with open(os.path.join(crate, rel), "rb") as fh:
                data = fh.read()
        except OSError:
            data = b""
        for chunk in (rel.encode(), b"\0", data, b"\0"):
            crc = zlib.crc32(chunk, crc)
            length += len(chunk)
    return f"{crc:08x}-{length}"


def _header(fmt: str, key: str, inputs: list[str], sources: str | None = None) -> str:
    from tools.hipify import native  # noqa: PLC0415

    return json.dumps(
        {
            "format": fmt,
            "interface": native.INTERFACE,
            "key": key,
            "inputs": [[path, _signature(path)] for path in inputs],
            "native_sources": sources,
        },
        separators=(",", ":"),
    )


def _current(path: str, fmt: str, key: str) -> bool:
    """Whether the file at ``path`` was written for ``key`` from inputs that have not changed since."""
    from tools.hipify import native  # noqa: PLC0415

    try:
        with open(path, encoding="utf-8") as fh:
            header = json.loads(fh.readline())
        if header["format"] != fmt or header["interface"] != native.INTERFACE or header["key"] != key:
            return False
        return all(_signature(p) == (tuple(sig) if sig is not None else None) for p, sig in header["inputs"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def build(options: HipifyOptions, hip_version: tuple[int, int] | None) -> list[object]:
    """The plan for ``options`` with the target ``hip_version`` (resolved: given or detected), in its three
    sections: what the tree pass needs, the lint's rules (None without the lint), the translator's plan."""
    from tools.hipify import lint, model, tree  # noqa: PLC0415

    key = tree._options_key(options, hip_version)
    tr = tree._translator(*key)
    db = tr.db
    info = {
        # exactly as hipify_tree builds it (engine=builtin: the only engine the fast path runs)
        "fingerprint": f"{cache.code_fingerprint()}/{db.fingerprint}/{key!r}/lint={options.lint}/engine=builtin",
        "hip_version": list(hip_version) if hip_version else None,
        "sync_define": tr.target.sync_define,
        # the report's database and target, in hipify_tree's order
        "database": [
            ["source", db.source],
            ["source_version", db.source_version],
            ["source_commit", db.source_commit],
            ["fingerprint", db.fingerprint],
            ["entries", str(len(db))],
        ],
        "target": [[k, v] for k, v in tr.target.describe().items()],
        "files": file_rules(),
        # the summary's order of kinds, and the values of the options the fast path reads itself
        "kinds": list(model.KINDS),
        "choices": {"launch": list(model.LAUNCH_STYLES), "naming": list(model.NAMING_STYLES)},
    }
    return [info, lint.export_plan() if options.lint else None, tr.export_plan()]


def file_rules() -> dict[str, list[str]]:
    """The tree pass's file tables (engine/tree_path.rs's ``FileRules``): which files are translated, which
    directories skipped, which files are headers or can need the runtime include, which includes are the
    system's."""
    from tools.hipify import insert, tree  # noqa: PLC0415

    return {
        "source_suffixes": sorted(tree.SOURCE_SUFFIXES),
        "skip_dirs": sorted(tree.SKIP_DIRS),
        "header_suffixes": sorted(tree.HEADER_SUFFIXES),
        "system_headers": sorted(tree.SYSTEM_HEADERS),
        "system_prefixes": list(tree._SYSTEM_PREFIXES),
        "implicit_suffixes": sorted(insert.IMPLICIT_SUFFIXES),
    }


def options_plan_key(options: HipifyOptions, hip_version: tuple[int, int] | None) -> str:
    """``plan_key`` for ``options`` (the override file as tree.py's key has it: absolute, normalised)."""
    from tools.hipify import tree  # noqa: PLC0415

    return plan_key(
        hip_version,
        tree._options_key(options, hip_version)[0],
        comments=options.translate_comments_and_strings,
        unmapped=options.report_unmapped,
        launch=options.launch_style == "hipLaunchKernelGGL",
        lint=options.lint,
    )


def plan_path(options: HipifyOptions, hip_version: tuple[int, int] | None) -> tuple[str, str] | None:
    """(the plan's path, its key) for ``options``, or None when the compiled cache is off."""
    directory = cache.cache_dir()
    if directory is None:
        return None
    key = options_plan_key(options, hip_version)
    return os.path.join(directory, entry_name("plan", key)), key


def refresh(options: HipifyOptions, hip_version: tuple[int, int] | None) -> bool:
    """Write the plan for ``options`` (and the detect file) unless current; True when something was written."""
    if options.engine != "builtin":
        return False
    wrote = refresh_detect()
    where = plan_path(options, hip_version)
    if where is None:
        return wrote
    path, key = where
    if _current(path, PLAN_FORMAT, key):
        return wrote
    return cache.write_entry(path, plan_text(options, hip_version, key).encode()) or wrote


def plan_text(options: HipifyOptions, hip_version: tuple[int, int] | None, key: str) -> str:
    """The plan file's contents: the header line, then the plan."""
    overrides = key.split("\0")[3] or None
    # (signatures first: an edit meanwhile is seen)
    header = _header(PLAN_FORMAT, key, plan_inputs(overrides), native_sources())
    sections = [json.dumps(section, separators=(",", ":")) for section in build(options, hip_version)]
    return "\n".join([header, *sections, ""])


def _opt_dir() -> str:
    """Where tree.detect_hip_version looks for /opt/rocm* (its default)."""
    from tools.hipify import tree  # noqa: PLC0415

    defaults = tree.detect_hip_version.__defaults__ or (None, "/opt")
    return str(defaults[-1])


def detect_data(opt: str) -> dict[str, object]:
    """What rocm.installed_version uses, as tree.detect_hip_version calls it (the fallback roots as found now)."""
    from pathlib import Path  # noqa: PLC0415

    from buildcore.toolchain import rocm  # noqa: PLC0415

    return {
        "env": list(rocm.ENV),
        "roots": [str(p) for p in rocm.fallback_roots(Path(opt))],
        "version_files": [list(v) for v in rocm.VERSION_FILES],
    }


def detect_inputs(opt: str) -> list[str]:
    toolchain = os.path.join(_REPO, "build_backend", "toolchain")
    return [
        os.path.join(toolchain, "rocm.py"),
        os.path.join(toolchain, "model.py"),
        os.path.join(_HERE, "tree.py"),
        opt,  # (the fallback roots: /opt/rocm, the newest /opt/rocm-X.Y.Z)
    ]


def detect_path() -> tuple[str, str] | None:
    directory = cache.cache_dir()
    if directory is None:
        return None
    key = f"{DETECT_FORMAT}\0{TOOLS_DIR}"
    return os.path.join(directory, entry_name("detect", key)), key


def refresh_detect() -> bool:
    where = detect_path()
    if where is None:
        return False
    path, key = where
    if _current(path, DETECT_FORMAT, key):
        return False
    opt = _opt_dir()
    header = _header(DETECT_FORMAT, key, detect_inputs(opt))
    return cache.write_entry(path, f"{header}\n{json.dumps(detect_data(opt), separators=(',', ':'))}\n".encode())
