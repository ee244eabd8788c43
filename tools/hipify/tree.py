"""Translate source trees out of place, incrementally, in parallel: ``hipify_tree``."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

from tools.errors import ToolError
from tools.hipify import insert, scope, simd
from tools.hipify.hashing import code_fingerprint, file_sha256_hex, sha256_hex
from tools.hipify.headers import table_row
from tools.hipify.mapping import MappingDatabase, load_database
from tools.hipify.model import ENGINES, LAUNCH_STYLES, NAMING_STYLES, Finding, HipifyOptions, HipifyResult
from tools.hipify.translate import RawFinding, Translator, positions

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs milliseconds to import: start-up time)
    from typing import BinaryIO

#: files translated (everything else under a source directory is copied byte for byte)
SOURCE_SUFFIXES = frozenset(
    {
        ".cu",
        ".cuh",
        ".c",
        ".cc",
        ".cpp",
        ".cxx",
        ".c++",
        ".h",
        ".hh",
        ".hpp",
        ".hxx",
        ".h++",
        ".inl",
        ".inc",
        ".ipp",
        ".tpp",
        ".hip",
    }
)
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
STATE_FILE = ".hipify-state.json"
STATE_SCHEMA = "monarch-runtime/hipify-state/v1"
# Below this much changed input a process pool costs more than it saves (its start, and sending results back).
PARALLEL_MIN_BYTES = 2 << 20
COPY_COST = 16  # a copied file's bytes count for 1/16 (hashing and copying them is ~16x cheaper than translating)

# (compiled where used: start-up time)
_INCLUDE_LINE = rb"^[ \t]*\#[ \t]*include[ \t]*([<\"])([^>\"\r\n]*)[>\"]"


def detect_hip_version(env: Mapping[str, str] | None = None, opt_dir: str = "/opt") -> tuple[int, int] | None:
    """The HIP version of the ROCm the build would find (ROCM_HOME, ROCM_PATH, /opt/rocm, the newest
    /opt/rocm-X.Y.Z, /usr: buildcore/toolchain/rocm.py, the one list), or None."""
    from buildcore.toolchain import rocm  # noqa: PLC0415 - only when no target is given (start-up time)

    return rocm.installed_version(os.environ if env is None else env, Path(opt_dir))


def parse_hip_version(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", text)
    if not m:
        raise ToolError(f"bad HIP version {text!r}: expected MAJOR.MINOR, e.g. 5.2")
    return (int(m.group(1)), int(m.group(2)))


# -- naming ------------------------------------------------------------------------------------------
def _swap_cuda(text: str) -> str:
    return text.replace("cuda", "hip").replace("CUDA", "HIP")


def output_relpath(rel: PurePosixPath, changed: bool, naming: str = "hipify_torch") -> PurePosixPath:
    """hipify_torch's naming rules, applied to a path relative to its source root.

    ``.cu`` -> ``.hip`` always; ``cuda``/``CUDA`` -> ``hip``/``HIP`` in directory names always (so the layout
    stays consistent); for a file whose contents changed, ``cuda``/``CUDA`` in its name -> ``hip``/``HIP``,
    and when neither its directory nor its name changed, ``_hip`` is appended to the stem
    (``bridge.h`` -> ``bridge_hip.h``). Unchanged files keep their name.
    """
    return PurePosixPath(_output_rel(rel.as_posix(), changed, naming))


#: headers of the C and C++ standard libraries and of POSIX/Linux/Windows: an include of one of these is never
#: resolved to a project file by its name alone (see hipify_tree's include-directory fallback)
SYSTEM_HEADERS = frozenset(
    (
        "assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h setjmp.h "
        "signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h stdio.h stdlib.h stdnoreturn.h "
        "string.h tgmath.h threads.h time.h uchar.h wchar.h wctype.h "
        "unistd.h fcntl.h dirent.h dlfcn.h pthread.h sched.h semaphore.h getopt.h libgen.h glob.h fnmatch.h "
        "poll.h termios.h syslog.h pwd.h grp.h netdb.h strings.h malloc.h alloca.h execinfo.h cpuid.h "
        "immintrin.h emmintrin.h xmmintrin.h x86intrin.h "
        "windows.h winsock2.h direct.h io.h process.h intrin.h "
        "algorithm any array atomic bit bitset cassert cctype cerrno cfenv cfloat charconv chrono cinttypes climits "
        "clocale cmath codecvt compare complex concepts condition_variable coroutine csetjmp csignal cstdarg cstddef "
        "cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype deque exception execution filesystem "
        "format forward_list fstream functional future initializer_list iomanip ios iosfwd iostream istream "
        "iterator latch limits list locale map memory memory_resource mutex new numbers numeric optional ostream "
        "queue random ranges ratio regex scoped_allocator semaphore set shared_mutex source_location span sstream "
        "stack stdexcept stop_token streambuf string string_view syncstream system_error thread tuple type_traits "
        "typeindex typeinfo unordered_map unordered_set utility valarray variant vector version"
    ).split()
)
_SYSTEM_PREFIXES = ("sys/", "arpa/", "netinet/", "linux/", "asm/", "bits/", "net/")


def is_system_header(spelling: str) -> bool:
    """Whether ``spelling`` names a C/C++ standard, POSIX, Linux or Windows system header."""
    return spelling in SYSTEM_HEADERS or spelling.startswith(_SYSTEM_PREFIXES)


def _output_rel(rel: str, changed: bool, naming: str, taken: frozenset[str] | set[str] = frozenset()) -> str:
    """``output_relpath`` on a ``/``-separated string (the tree pass calls it for every file). ``taken``: the
    paths (directories renamed) of the tree's files: ``cuda`` -> ``hip`` in a file's name never gives another
    file's name (ggml's ``vendors/cuda.h`` beside its hand-written ``vendors/hip.h``): ``_hip`` is appended then."""
    parent, _, name = rel.rpartition("/")
    dot = name.rfind(".")
    # PurePosixPath's stem/suffix: a leading dot starts no suffix, nor does a trailing one
    if dot <= 0 or dot == len(name) - 1:
        stem, suffix = name, ""
    else:
        stem, suffix = name[:dot], name[dot:]
    new_suffix = ".hip" if suffix == ".cu" else suffix
    if naming == "keep":
        return f"{parent}/{stem}{new_suffix}" if parent else stem + new_suffix
    new_parent = _swap_cuda(parent)
    new_stem = stem
    if changed:
        new_stem = _swap_cuda(stem)
        if new_parent == parent and new_stem + new_suffix == name:
            new_stem = stem + "_hip"
        elif new_stem != stem and taken and f"{new_parent}/{new_stem}{new_suffix}".lstrip("/") in taken:
            new_stem = stem + "_hip"
    return f"{new_parent}/{new_stem}{new_suffix}" if new_parent else new_stem + new_suffix


# -- per-file work (runs in worker processes too) --------------------------------------------------------
# (overrides, hip_version, comments, unmapped, launch, (void) for discarded results, the project's constant lane masks)
Key = tuple[str | None, tuple[int, int] | None, bool, bool, bool, bool, tuple[tuple[str, str, int, int, bool], ...]]
#: headers whose constant lane masks count for every file (tools/hipify/masks.py)
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".h++", ".cuh", ".inl", ".inc", ".ipp", ".tpp"})


@lru_cache(maxsize=4)
def _translator(  # noqa: PLR0917
    overrides: str | None,
    hip_version: tuple[int, int] | None,
    comments: bool,
    unmapped: bool,
    launch: bool,
    void_discarded: bool = False,
    project_masks: tuple[tuple[str, str, int, int, bool], ...] = (),
) -> Translator:
    db = load_database(Path(overrides) if overrides else None)
    return Translator(
        db,
        hip_version,
        translate_comments_and_strings=comments,
        report_unmapped=unmapped,
        launch=launch,
        project_masks=project_masks,
        void_discarded=void_discarded,
    )


def project_masks(paths: Iterable[str], wanted: frozenset[bytes]) -> tuple[tuple[str, str, int, int, bool], ...]:
    """The integer constants named ``wanted`` that the headers among ``paths`` define (``masks.header_masks``)."""
    from tools.hipify.masks import header_masks, merge_header_masks  # noqa: PLC0415

    tables = []
    for path in paths:
        if os.path.splitext(path)[1].lower() not in HEADER_SUFFIXES:
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue  # reported when translated
        tables.append(header_masks(data, wanted))
    return merge_header_masks(tables)


def _project_mask_pass(
    paths: Sequence[str], procs: list[_Processed], key: Key, lint: bool
) -> tuple[list[_Processed], set[str]]:
    """A lane mask named in a file but defined in a project header (``#define FULL_MASK 0xffffffff`` in a
    common header): the files that name masks they do not define are translated again, with the constants the
    headers among ``paths`` define under those names. Returns the results and the paths translated again (each
    run does this again for them: a header's edit changes their translation)."""
    wanted = frozenset(n.encode("latin-1") for p in procs for n in p.unresolved)
    if not wanted:
        return procs, set()
    table = project_masks(paths, wanted)
    found = {name for name, *_ in table}
    redo: list[Item] = [
        (p.path, True, None) for p in procs if p.mode == "translate" and found.intersection(p.unresolved)
    ]
    if not redo:
        return procs, set()
    again = {r.path: r for r in _process_batch(redo, (*key[:6], table), lint)}
    for p in procs:
        r = again.get(p.path)
        if r is not None:
            r.unresolved = p.unresolved  # what it depends on, for the next run
    return [again.get(p.path, p) for p in procs], set(again)


# (line, column, name, kind, reason, suggestion, blocking, rule)
_FindingTuple = tuple[int, int, str, str, str, str, bool, str]
# (out_start, out_end, spelling, angled, mapped: the output has the database's header there)
# (start, end of the path in the output, the path as written, angled, a mapped header, the line of the #include)
_IncludeTuple = tuple[int, int, str, bool, bool, int]


class _Processed:
    __slots__ = (
        "changed",
        "copied_to",
        "cuda_changed",
        "data",
        "defines",
        "device",
        "directives",
        "error",
        "evicted",
        "facts",
        "findings",
        "guard",
        "guard_at",
        "guard_line",
        "includes",
        "insert_at",
        "insert_line",
        "mode",
        "path",
        "sha",
        "simd_defined",
        "simd_used",
        "unresolved",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self.mode = "translate"  # translate | copy | error
        self.data: bytes | None = b""  # None: known from the previous run's record, not read again
        self.evicted = False  # data dropped to bound memory (RETAIN_BYTES) or a copy: made again when written
        self.copied_to: str | None = None  # a copy already made, there (see _hash_and_copy)
        self.sha = ""
        self.changed = False
        self.findings: list[_FindingTuple] = []
        self.includes: list[_IncludeTuple] = []
        self.defines: list[str] = []
        self.error = ""
        self.facts = 0  # what the file uses and includes (tools/hipify/insert.py)
        self.insert_at = 0  # where lines added by the tree pass go, in the translated bytes
        self.insert_line = 1  # the line there
        self.unresolved: list[str] = []  # lane-mask names the file does not define (see _project_mask_pass)
        self.cuda_changed = False  # the translation changed its CUDA content (FileResult.cuda_changed): renamed by it
        self.directives: list[tuple[str, int, int, str]] = []  # conditionals and #define/#undef (cond.directives)
        self.device = False  # has __global__/__device__ code (scope.roles)
        self.simd_used: list[str] = []
        self.simd_defined: list[str] = []
        # where the runtime include goes when the file's CUDA code is only for CUDA compilers (insert.guard_line):
        # -1 at the top as usual, 0 at the top inside #ifdef __HIPCC__, else the input line of the guarded branch;
        # guard_at/guard_line: that place in the translated bytes
        self.guard = -1
        self.guard_at = 0
        self.guard_line = 0

    def record(self) -> dict[str, object]:
        """What the next run needs to reuse this result (see _from_cache)."""
        return {
            "sha": self.sha,
            "mode": self.mode,
            "changed": self.changed,
            "findings": [list(f) for f in self.findings],
            "includes": [list(i) for i in self.includes],
            "defines": self.defines,
            "facts": [self.facts, self.insert_at, self.insert_line],
            "unresolved": self.unresolved,
            "cuda_changed": self.cuda_changed,
            "directives": "\n".join(f"{k}\t{a}\t{b}\t{t}" for k, a, b, t in self.directives),
            "device": self.device,
            "simd": [self.simd_used, self.simd_defined],
            "guard": [self.guard, self.guard_at, self.guard_line],
        }

    def locate_insertion(self, source_lines: int = -1) -> None:
        """Where added lines would go in ``data`` (the translated bytes); ``source_lines``: the source's line count
        (a guarded place is a line of the source: the same line of the output while the translation keeps the
        lines)."""
        data = self.data or b""
        self.insert_at = insert.insertion_point(data)
        self.insert_line = data.count(b"\n", 0, self.insert_at) + 1
        if self.guard > 0:
            if source_lines >= 0 and data.count(b"\n") != source_lines:
                self.guard = 0  # (lines moved: the top, inside #ifdef __HIPCC__)
            else:
                at = 0
                for _ in range(self.guard - 1):
                    at = data.index(b"\n", at) + 1
                self.guard_at, self.guard_line = at, self.guard


def _process(path: str, translate: bool, key: Key, lint: bool) -> _Processed:
    res = _Processed(path)
    if not translate:  # copied when written, from the source: only its hash is needed now
        return _hash_and_copy(path, None, None)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        res.mode = "error"
        res.error = f"cannot read: {err.strerror or err}"
        return res
    res.sha = sha256_hex(data)
    if b"\0" in data[:8192]:
        res.mode = "copy"
        res.data = data
        return res
    tr = _translator(*key)
    fr = tr.translate(data)
    raw: list[RawFinding] = list(fr.findings)
    if b"hipify:" in data and any(f.kind == "hazard" for f in raw):  # "// hipify: ignore(rule)" on the line
        from tools.hipify.lint import silenced  # noqa: PLC0415 - rare

        raw = [f for f in raw if f.kind != "hazard" or not silenced(data, f.offset, f.rule)]
    if lint:
        from tools.hipify.lint import lint_bytes  # noqa: PLC0415 - lazy: lint is optional

        raw.extend(lint_bytes(data, fr.comment_spans))
    pos = positions(data, [f.offset for f in raw])
    res.findings = [(*pos[f.offset], f.name, f.kind, f.reason, f.suggestion, f.blocking, f.rule) for f in raw]
    res.data = fr.data
    res.changed = fr.changed
    lines = positions(data, [i.in_offset for i in fr.includes])
    res.includes = [
        (i.out_start, i.out_end, i.spelling, i.angled, i.mapped, lines[i.in_offset][0]) for i in fr.includes
    ]
    res.defines = fr.defines
    res.facts = fr.facts
    if not fr.facts & insert.HAS_RUNTIME and os.path.splitext(path)[1].lower() in insert.IMPLICIT_SUFFIXES:
        res.facts |= insert.uses(data, fr.comment_spans)  # (only these files can need the runtime include)
    # (for the headers nvcc's runtime includes and the target's does not: data/targets.tsv runtime-include)
    res.facts |= insert.runtime_include_uses(data, fr.comment_spans, tr.target.runtime_includes, fr.facts)
    res.unresolved = fr.unresolved
    res.cuda_changed = fr.cuda_changed
    res.directives = fr.directives
    res.simd_used = fr.simd_used
    res.simd_defined = fr.simd_defined
    res.device = fr.device
    suffix = os.path.splitext(path)[1].lower()
    if suffix != ".cu" and (res.facts & (insert.USES_DEVICE | insert.USES_API) or fr.simd_used):
        res.guard = insert.guard_line(
            data, fr.comment_spans, scope.builtin_lookup(scope.HOST_CC, tr.hip_name, tr.undefined_in_hip)
        )
    res.locate_insertion(data.count(b"\n"))
    return res


# Translated bytes kept in memory between the translation and the write pass (which needs every header's
# rename first). Beyond this, a file's bytes are dropped and it is translated again when written: memory stays
# bounded by this budget plus the largest file, at the cost of translating the excess twice.
RETAIN_BYTES = 32 * 1024 * 1024


# (source, whether it is translated, where a copied one is copied now: into a new output directory, by the first
# file that claims that output; None: when written)
Item = tuple[str, bool, "str | None"]


class _Retention:
    """What a process keeps of translated bytes: up to ``limit`` (None: everything)."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.held = 0

    def keep(self, res: _Processed) -> None:
        if self.limit is None or not res.data:
            return
        if self.held and self.held + len(res.data) > self.limit:  # (a lone big file is kept: no gain in evicting it)
            res.data, res.evicted = None, True
        else:
            self.held += len(res.data)


def _process_batch(
    items: list[Item],
    key: Key,
    lint: bool,
    retention: _Retention | None = None,
    writer: _Writer | None = None,
) -> list[_Processed]:
    out = []
    for path, translate, copy_to in items:
        res = _process(path, translate, key, lint) if translate else _hash_and_copy(path, copy_to, writer)
        if retention is not None:
            retention.keep(res)
        out.append(res)
    return out


def _hash_and_copy(path: str, dst: str | None, writer: _Writer | None) -> _Processed:
    """A copied file's result (its hash); copied to ``dst`` in ``writer``'s new output directory too, unless
    None. (The copy is made while the translations run; nothing else can claim that output: see hipify_tree.)"""
    res = _Processed(path)
    res.mode = "copy"
    res.data, res.evicted = None, True  # (copied from the source when written)
    try:
        fh = open(path, "rb")  # (closed below; read twice)
    except OSError as err:
        res.mode = "error"
        res.error = f"cannot read: {err.strerror or err}"
        return res
    with fh:
        try:
            res.sha = file_sha256_hex(fh)
        except OSError as err:
            res.mode = "error"
            res.error = f"cannot read: {err.strerror or err}"
            return res
        if dst is not None and writer is not None:
            fh.seek(0)
            writer.copy_open(fh, dst)
            res.copied_to = dst
    return res


# -- the tree pass -----------------------------------------------------------------------------------
class _Source:
    __slots__ = ("is_dir_root", "key", "path", "rel", "root")

    def __init__(self, path: Path, rel: str, root: Path, is_dir_root: bool) -> None:
        self.path = path  # absolute, normalised
        self.key = str(path)  # (the tree pass looks files up by it, often)
        self.rel = rel  # relative to its root, "/"-separated
        self.root = root  # the source directory (or the file's parent for a file argument)
        self.is_dir_root = is_dir_root


def _abs(path: Path) -> Path:
    return Path(os.path.normpath(os.path.abspath(path)))


def _is_within(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


def _walk(sources: Sequence[Path], out_dir: Path) -> tuple[list[_Source], list[Path]]:
    found: list[_Source] = []
    roots: list[Path] = []
    for given in sources:
        src = _abs(given)
        if not src.exists():
            raise ToolError(f"source not found: {given}")
        if src.is_dir():
            if src == out_dir or _is_within(src, out_dir):
                raise ToolError(f"output directory {out_dir} contains source {given}: refusing to translate in place")
            roots.append(src)
            out_str = str(out_dir)
            prefix_len = len(str(src)) + 1
            for dirpath, dirnames, filenames in os.walk(src):
                dirnames[:] = sorted(
                    d
                    for d in dirnames
                    if d not in SKIP_DIRS
                    and not d.startswith(".")
                    and not (os.path.join(dirpath, d) + os.sep).startswith(out_str + os.sep)
                )
                rel_dir = dirpath[prefix_len:].replace(os.sep, "/")
                for name in sorted(filenames):
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    found.append(_Source(Path(dirpath, name), rel, src, True))
        else:
            found.append(_Source(src, src.name, src.parent, False))
    return found, roots


def _options_key(
    options: HipifyOptions, hip_version: tuple[int, int] | None, masks: tuple[tuple[str, str, int, int, bool], ...] = ()
) -> Key:
    overrides = str(_abs(options.mapping_overrides)) if options.mapping_overrides else None
    return (
        overrides,
        hip_version,
        options.translate_comments_and_strings,
        options.report_unmapped,
        options.launch_style == "hipLaunchKernelGGL",
        options.void_discarded,
        masks,
    )


def _run_all(  # noqa: PLR0917
    items: list[Item],
    costs: list[int],
    key: Key,
    lint: bool,
    jobs: int | None,
    budget: int | None = RETAIN_BYTES,
    writer: _Writer | None = None,
) -> list[_Processed]:
    """Every item's result, in order: shared with forked worker processes when there is enough work (``costs``:
    an estimate of each item's, in bytes of translated input)."""
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if (
        workers <= 1
        or len(items) < 2
        or (jobs is None and sum(costs) < PARALLEL_MIN_BYTES)
        or not hasattr(os, "fork")  # (-j needs fork: the platforms without it run it here)
    ):
        return _process_batch(items, key, lint, _Retention(budget), writer)
    return _forked(items, costs, key, lint, min(workers, len(items)), budget, writer)


def _chunks(costs: list[int], count: int) -> list[list[int]]:
    """Item indexes in ``count`` chunks of about equal total cost (the costliest first, each into the lightest
    chunk), each in the items' order."""
    totals = [0] * count
    chunks: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(costs)), key=costs.__getitem__, reverse=True):
        lightest = totals.index(min(totals))
        chunks[lightest].append(i)
        totals[lightest] += max(costs[i], 1)
    return [sorted(c) for c in chunks if c]


def _forked(  # noqa: PLR0917
    items: list[Item],
    costs: list[int],
    key: Key,
    lint: bool,
    workers: int,
    budget: int | None,
    writer: _Writer | None,
) -> list[_Processed]:
    """``items`` shared by this process and ``workers - 1`` forked ones (no pool to start: multiprocessing and
    concurrent.futures cost more to import than a small tree takes). The work is cut into chunks of about equal
    cost, handed out through a pipe, one byte a chunk, to whichever process is free (a neighbour's load slows
    one process, not the run); each forked process sends its results back pickled, through a pipe of its own."""
    import pickle  # noqa: PLC0415 - only here (start-up time)
    import signal  # noqa: PLC0415

    chunks = [[items[i] for i in c] for c in _chunks(costs, min(len(items), workers * 8, 255))]
    queue_r, queue_w = os.pipe()
    os.write(queue_w, bytes(range(len(chunks))))  # (at most 255 bytes: one write, well within a pipe)
    os.close(queue_w)
    share = None if budget is None else budget // workers

    def take() -> list[_Processed]:
        retention = _Retention(share)
        out: list[_Processed] = []
        while chunk := os.read(queue_r, 1):
            out += _process_batch(chunks[chunk[0]], key, lint, retention, writer)
        return out

    children: list[tuple[int, int]] = []
    try:
        for _ in range(workers - 1):
            result_r, result_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: its results (or its exception) go back through the pipe, then it ends
                status = 1
                try:
                    os.close(result_r)
                    try:
                        payload: tuple[str, object] = ("ok", take())
                        status = 0
                    except BaseException as err:  # (raised again in the parent)
                        payload = ("error", err)
                    with os.fdopen(result_w, "wb") as sink:
                        try:
                            pickle.dump(payload, sink, protocol=pickle.HIGHEST_PROTOCOL)
                        except Exception as err:  # (an exception that cannot be pickled)
                            pickle.dump(("error", RuntimeError(f"{payload[1]!r}: {err}")), sink)
                finally:
                    os._exit(status)  # (nothing of the parent's to run or flush: no atexit, no buffers)
            os.close(result_w)
            children.append((pid, result_r))
        results = take()
        while children:
            pid, result_r = children[0]
            with os.fdopen(result_r, "rb") as source:
                blob = source.read()
            children.pop(0)
            os.waitpid(pid, 0)
            if not blob:
                raise ToolError(
                    f"hipify's worker process {pid} ended without its results (killed: out of memory?); nothing was "
                    "written. Run again, or with -j 1 (one process).",
                    exit_code=1,
                )
            kind, value = pickle.loads(blob)  # noqa: S301 - from our own forked process
            if kind != "ok":
                raise value
            results += value
    except BaseException:
        for pid, result_r in children:  # (the run failed: its workers go too)
            os.close(result_r)
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        raise
    finally:
        os.close(queue_r)
    by_path = {res.path: res for res in results}
    return [by_path[path] for path, _translate, _copy_to in items]


def _write_atomic(path: Path, data: bytes, made_dirs: set[str] | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (readers never see half a file)."""
    parent = os.path.dirname(path)
    if made_dirs is None or parent not in made_dirs:
        os.makedirs(parent, exist_ok=True)
        if made_dirs is not None:
            made_dirs.add(parent)
    tmp = f"{parent}/.{os.path.basename(path)}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class _Writer:
    """Writes a run's outputs. Into an output directory that does not exist yet, files are written plainly
    into a staging directory beside it that is renamed into place once everything is written (one rename
    for the whole tree instead of one per file, and an interrupted run leaves nothing); into an existing
    one, each file goes through a temporary file and a rename (readers never see half a file)."""

    def __init__(self, out_dir: Path) -> None:
        self.final = str(out_dir)
        self.fresh = not os.path.lexists(out_dir)
        self.root = f"{os.path.dirname(self.final)}/.{os.path.basename(self.final)}.{os.getpid()}.hipify-tmp"
        self.made_dirs: set[str] = set()

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, kind: type[BaseException] | None, _value: object, _tb: object) -> None:
        if kind is not None:
            self.discard()
        elif self.fresh and os.path.isdir(self.root):
            os.rename(self.root, self.final)  # (nothing written: no directory, as before)

    def discard(self) -> None:
        """What a failed run leaves: nothing of a new output directory."""
        if self.fresh:
            import shutil  # noqa: PLC0415 - only on failure (start-up time)

            shutil.rmtree(self.root, ignore_errors=True)

    def _where(self, path: Path) -> str:
        text = str(path)
        return self.root + text[len(self.final) :] if self.fresh else text

    def write(self, path: Path, data: bytes) -> None:
        if not self.fresh:
            _write_atomic(path, data, self.made_dirs)
            return
        where = self._where(path)
        parent = os.path.dirname(where)
        if parent not in self.made_dirs:
            os.makedirs(parent, exist_ok=True)
            self.made_dirs.add(parent)
        with open(where, "wb") as fh:
            fh.write(data)

    def copy_open(self, source: BinaryIO, path: str) -> None:
        """Copy the open file ``source`` into a new output directory (a run's first write of ``path``)."""
        where = self.root + path[len(self.final) :]
        parent = os.path.dirname(where)
        if parent not in self.made_dirs:
            os.makedirs(parent, exist_ok=True)
            self.made_dirs.add(parent)
        with open(where, "wb") as dst:
            _copy_file(source, dst)

    def copy(self, source: Path, path: Path) -> bool:
        """Make ``path`` a copy of the file ``source``; False when it already was one (an existing output)."""
        if not self.fresh:
            with open(source, "rb") as fh:
                data = fh.read()
            if _same_content(path, data):
                return False
            _write_atomic(path, data, self.made_dirs)
            return True
        where = self._where(path)
        parent = os.path.dirname(where)
        if parent not in self.made_dirs:
            os.makedirs(parent, exist_ok=True)
            self.made_dirs.add(parent)
        with open(source, "rb") as src, open(where, "wb") as dst:
            _copy_file(src, dst)
        return True

    def same_content(self, path: Path, data: bytes) -> bool:
        return not self.fresh and _same_content(path, data)

    def stat(self, path: Path) -> os.stat_result | None:
        try:
            return os.stat(self._where(path))
        except OSError:
            return None


def _copy_file(src: BinaryIO, dst: BinaryIO) -> None:
    """Copy ``src`` into ``dst`` in the kernel (sendfile: no bytes through Python), else by pieces."""
    offset = 0
    try:
        while sent := os.sendfile(dst.fileno(), src.fileno(), offset, 1 << 30):
            offset += sent
    except (OSError, AttributeError):  # (no sendfile for these files: copy what is left by hand)
        src.seek(offset)
        dst.seek(offset)
        while piece := src.read(1 << 20):
            dst.write(piece)


def _same_content(path: Path, data: bytes) -> bool:
    try:
        if path.stat().st_size != len(data):
            return False
        with open(path, "rb") as fh:
            return fh.read() == data
    except OSError:
        return False


def _load_state(out_dir: Path) -> dict[str, object]:
    """The previous run's record in ``out_dir`` (empty when absent, unreadable or of another schema)."""
    try:
        state = json.loads((out_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(state, dict) or state.get("schema") != STATE_SCHEMA:
        return {}
    return state


def _code_fingerprint() -> str:
    """Hash of this package's code and data: a cached translation is reused only by the same tool."""
    return code_fingerprint()


def _check_options(options: HipifyOptions) -> None:
    if options.launch_style not in LAUNCH_STYLES:
        raise ToolError(f"launch_style must be one of {', '.join(LAUNCH_STYLES)}, not {options.launch_style!r}")
    if options.naming not in NAMING_STYLES:
        raise ToolError(f"naming must be one of {', '.join(NAMING_STYLES)}, not {options.naming!r}")
    if options.engine not in ENGINES:
        raise ToolError(f"engine must be one of {', '.join(ENGINES)}, not {options.engine!r}")
    if options.jobs is not None and options.jobs < 1:
        raise ToolError("jobs must be at least 1")


def hipify_tree(sources: Iterable[Path], out_dir: Path, options: HipifyOptions | None = None) -> HipifyResult:
    """Translate ``sources`` (files and/or directories) into ``out_dir``; never writes a source.

    A directory's files are mirrored under ``out_dir`` (renamed by the naming rules); a file argument
    lands directly in ``out_dir``. Outputs whose content would not change are not rewritten (mtime kept);
    outputs of sources that disappeared since the last run into the same ``out_dir`` are removed.
    A file whose content hash, options and tool are unchanged since the last run is not translated again:
    its findings come from ``out_dir/.hipify-state.json``.
    """
    opts = options or HipifyOptions()
    _check_options(opts)
    started = time.perf_counter()
    out_abs = _abs(out_dir)
    srcs, roots = _walk(list(sources), out_abs)
    hip_version = opts.hip_version if opts.hip_version is not None else detect_hip_version()
    key = _options_key(opts, hip_version)
    db: MappingDatabase = _translator(*key).db  # also validates the override file early
    ext = None
    if opts.engine == "hipify_torch":
        from tools.hipify.engines import external_translator  # noqa: PLC0415 - optional engine

        ext = external_translator()  # raises ToolError when not importable
    fingerprint = f"{_code_fingerprint()}/{db.fingerprint}/{key!r}/lint={opts.lint}/engine={opts.engine}"

    previous = _load_state(out_abs)
    prev_files_obj = previous.get("files", {})
    prev_files: dict[str, dict[str, object]] = prev_files_obj if isinstance(prev_files_obj, dict) else {}
    cache_ok = previous.get("fingerprint") == fingerprint

    # A new output directory is written into a staging directory beside it (see _Writer): the copies go
    # there while the translations run.
    writer = _Writer(out_abs)
    try:
        # Hash every input; only new or changed ones are translated (in parallel when worth it), the others
        # are hashed (and, into a new output directory, copied) meanwhile.
        out_root = str(out_abs)
        processed: list[_Processed | None] = []
        todo: list[Item] = []
        costs: list[int] = []  # (the bytes to translate: a copy costs far less per byte)
        early: set[str] = set()
        for s in srcs:
            path = s.key
            translate = s.path.suffix.lower() in SOURCE_SUFFIXES
            hit = _from_cache(path, prev_files.get(path)) if cache_ok else None
            if hit is not None:
                processed.append(hit)
                continue
            processed.append(None)
            copy_to = None
            if not translate and writer.fresh:
                # (a copy's output name depends on no other file, and no translated file can have it: its
                # suffix would be a source suffix; of two copies with one output, the first claims it)
                copy_to = f"{out_root}/{_output_rel(s.rel, False, opts.naming)}"
                copy_to = None if copy_to in early else copy_to
                early.add(copy_to or "")
            todo.append((path, translate, copy_to))
            try:
                size = os.stat(path).st_size
            except OSError:
                size = 0
            costs.append(size if translate else size // COPY_COST)
        budget = None if ext is not None else RETAIN_BYTES  # an external engine rewrites the held bytes
        fresh = {p.path: p for p in _run_all(todo, costs, key, opts.lint, opts.jobs, budget, writer)}
        procs: list[_Processed] = [p if p is not None else fresh[s.key] for s, p in zip(srcs, processed)]
        procs, redone = _project_mask_pass([s.key for s in srcs], procs, key, opts.lint)
        if redone:
            todo += [(path, True, None) for path in redone if path not in fresh]
            fresh.update({p.path: p for p in procs if p.path in redone})
        if ext is not None:
            for res in fresh.values():
                _apply_external(res, ext)

        # String keys: this pass touches every include of every file, and Path objects are slow to make.
        by_key = {s.key: (s, p) for s, p in zip(srcs, procs)}
        # A file is renamed (x.h -> x_hip.h) only when the translation changed its CUDA content, not when it only
        # renamed a compiler-identification macro (__CUDACC__ -> __HIPCC__); its bytes are translated all the same.
        changed = {s.key: p.mode == "translate" and p.cuda_changed for s, p in zip(srcs, procs)}
        out_cache: dict[tuple[str, bool], tuple[Path, str, str]] = {}
        # the tree's files under their directories' new names (a renamed file never takes another's name)
        taken_names = {_output_rel(s.rel, False, opts.naming) for s in srcs}

        def out_info(src: _Source) -> tuple[Path, str, str]:
            """(output path, as a string, its directory)"""
            k = (src.key, changed[src.key])
            hit = out_cache.get(k)
            if hit is None:
                text = f"{out_root}/{_output_rel(src.rel, k[1], opts.naming, taken_names)}"
                hit = (Path(text), text, os.path.dirname(text))
                out_cache[k] = hit
            return hit

        def out_of(src: _Source) -> Path:
            return out_info(src)[0]

        resolved = resolve_includes(srcs, procs, roots)

        tr = _translator(*key)
        where = _Scope(srcs, procs, resolved, tr, opts)
        simd_path = f"{out_root}/{simd.OUTPUT_NAME}"
        if any(s.rel == simd.OUTPUT_NAME and s.is_dir_root for s in srcs):
            where.provided = frozenset()  # the tree has a file of that name at its top: it is not made
        additions = _additions(
            srcs,
            procs,
            resolved,
            tr.target.sync_define,
            where.provided,
            runtime_includes=len(tr.target.runtime_includes),
        )
        for src_key, (define, _header, _simd, _c_headers) in additions.items():
            # lines only CUDA/HIP compilers see (the file's CUDA code is guarded) change nothing a host compiler
            # reads: like a compiler-identification macro, they do not rename the file
            if define is not None or by_key[src_key][1].guard < 0:
                changed[src_key] = True

        def new_spelling(includer: _Source, target: _Source, how: str, spelling: str) -> str:
            if how == "dir":  # as many trailing components of the output as the spelling has (renamed alike)
                return "/".join(out_info(target)[1].split("/")[-(spelling.count("/") + 1) :])
            # Relative to the includer's output directory, or to the output root for a source-root base.
            out_base = out_info(includer)[2] if how == "local" else out_root
            return _relative(out_info(target)[1], out_base)

        # Fixpoint: rewriting an include changes the includer, which may rename it (x.h -> x_hip.h), ...
        moved = True
        while moved:
            moved = False
            for src_key, links in resolved.items():
                if changed[src_key]:
                    continue
                includer, proc = by_key[src_key]
                for idx, target, how in links:
                    spelling = proc.includes[idx][2]
                    if proc.includes[idx][4] or new_spelling(includer, target, how, spelling) != spelling:
                        changed[src_key] = True
                        moved = True
                        break
    except BaseException:
        writer.discard()
        raise

    with writer:
        findings: list[Finding] = []
        outputs: dict[Path, Path] = {}
        written: list[Path] = []
        unchanged: list[Path] = []
        copied: list[Path] = []
        claimed: dict[Path, Path] = {}
        source_set = {s.path for s in srcs}
        records: dict[str, dict[str, object]] = {}
        remade = 0
        defined: set[str] = set()
        for p in procs:
            defined.update(p.defines)
        for s, p in zip(srcs, procs):
            findings += where.findings(s.path, s.key, p, defined)
            if p.mode == "error":
                findings.append(
                    Finding(
                        s.path,
                        0,
                        0,
                        s.path.name,
                        kind="error",
                        reason=p.error,
                        suggestion="check the file's permissions",
                        blocking=True,
                        rule="unreadable",
                    )
                )
                continue
            dst = out_of(s)
            if dst in source_set:
                raise ToolError(f"output {dst} would overwrite a source file: choose another output directory")
            if dst in claimed:
                findings.append(
                    Finding(
                        s.path,
                        0,
                        0,
                        s.path.name,
                        kind="error",
                        reason=f"output {dst} is also the output of {claimed[dst]}",
                        suggestion="rename one of the two sources",
                        blocking=True,
                        rule="output-collision",
                    )
                )
                continue
            claimed[dst] = s.path
            edits: list[tuple[int, int, str]] = []
            for idx, target, how in resolved.get(s.key, ()):
                start, end, spelling, _angled, mapped, _line = p.includes[idx]
                new = new_spelling(s, target, how, spelling)
                if new != spelling or mapped:
                    edits.append((start, end, new))
            added = additions.get(s.key)
            if added is not None:
                define, header, wants_simd, c_headers = added
                crlf = bool(p.facts & insert.CRLF)
                simd_rel = _relative(simd_path, out_info(s)[2]) if wants_simd else None
                rows = [tr.target.runtime_includes[i] for i in c_headers]
                line = p.insert_line
                if p.guard > 0 and (header is not None or simd_rel is not None or rows):  # in the branch for CUDA
                    text = insert.render(None, header, crlf, simd_rel, headers=rows)
                    edits.append((p.guard_at, p.guard_at, text.decode("ascii")))
                    line = p.guard_line
                    if define is not None:
                        edits.append((p.insert_at, p.insert_at, insert.render(define, None, crlf).decode("ascii")))
                else:
                    text = insert.render(define, header, crlf, simd_rel, own_guard=p.guard == 0, headers=rows)
                    edits.append((p.insert_at, p.insert_at, text.decode("ascii")))
                findings += _addition_findings(s.path, line, define, header, tr.hip_version, guarded=p.guard >= 0)
            edits.sort(reverse=True)
            outputs[s.path] = dst
            if p.mode == "copy":
                copied.append(s.path)
            record = p.record()
            record["out"] = str(dst)
            record["edits"] = [list(e) for e in edits]
            prev = prev_files.get(s.key)
            # (fresh results are compared by content instead)
            stat = writer.stat(dst) if p.data is None and not p.evicted else None
            if (
                p.data is None
                and not p.evicted
                and isinstance(prev, dict)
                and prev.get("out") == str(dst)
                and prev.get("edits") == record["edits"]
                and stat is not None
                and [stat.st_size, stat.st_mtime_ns] == [prev.get("out_size"), prev.get("out_mtime_ns")]
            ):
                unchanged.append(dst)  # same input, same options, same output file: nothing to do
                record["out_size"], record["out_mtime_ns"] = stat.st_size, stat.st_mtime_ns
                records[s.key] = record
                continue
            if p.data is None:  # from the cache (or evicted), but the output must be (re)made
                remade += 0 if p.evicted else 1
            if p.data is None and p.mode == "copy" and not edits:
                if p.copied_to == str(dst) or writer.copy(s.path, dst):
                    written.append(dst)
                else:
                    unchanged.append(dst)
                stat = writer.stat(dst)
                if stat is not None:
                    record["out_size"], record["out_mtime_ns"] = stat.st_size, stat.st_mtime_ns
                records[s.key] = record
                continue
            if p.data is None:
                again = _process(s.key, p.mode == "translate", key, lint=False)
                if ext is not None:
                    _apply_external(again, ext)
                p.data = again.data
            data = p.data if p.data is not None else b""
            for start, end, new in edits:
                data = data[:start] + new.encode("latin-1") + data[end:]
            if writer.same_content(dst, data):
                unchanged.append(dst)
            else:
                writer.write(dst, data)
                written.append(dst)
            stat = writer.stat(dst)
            if stat is not None:
                record["out_size"], record["out_mtime_ns"] = stat.st_size, stat.st_mtime_ns
            records[s.key] = record

        # The compat header (tools/hipify/simd.py): the functions the tree uses and does not define itself.
        generated: list[Path] = []
        if any(a[2] for a in additions.values()) and where.provided:
            compat = Path(simd_path)
            if compat in claimed:
                raise ToolError(
                    f"output {compat} is both {claimed[compat]}'s and hipify's compat header: rename the source"
                )
            generated.append(compat)
            data = simd.render(sorted(where.provided))
            if writer.same_content(compat, data):
                unchanged.append(compat)
            else:
                writer.write(compat, data)
                written.append(compat)
            records[_SIMD_RECORD] = {"out": simd_path, "names": sorted(where.provided)}

        # Stale outputs: recorded by the previous run into this directory, not produced now.
        removed: list[Path] = []
        current = {str(d) for d in outputs.values()} | {str(g) for g in generated}
        old_outputs = [str(v.get("out")) for v in prev_files.values() if isinstance(v, dict) and v.get("out")]
        for old in sorted(set(old_outputs)):
            old_path = Path(old)
            if old in current or not _is_within(old_path, out_abs) or old_path in source_set:
                continue
            try:
                old_path.unlink()
            except OSError:
                continue
            removed.append(old_path)
            parent = old_path.parent
            while parent != out_abs and _is_within(parent, out_abs):
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent
        nothing_new = (
            cache_ok and not todo and not remade and not written and not removed and records.keys() == prev_files.keys()
        )
        if not nothing_new:  # (a no-op run leaves the record as it is: same inputs, same outputs)
            state = {"schema": STATE_SCHEMA, "fingerprint": fingerprint, "files": records}
            state_bytes = (json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n").encode()
            if not writer.same_content(out_abs / STATE_FILE, state_bytes):
                writer.write(out_abs / STATE_FILE, state_bytes)

    return HipifyResult(
        outputs,
        findings,
        written=written,
        unchanged=unchanged,
        removed=removed,
        copied=copied,
        hip_version=hip_version,
        database={
            "source": db.source,
            "source_version": db.source_version,
            "source_commit": db.source_commit,
            "fingerprint": db.fingerprint,
            "entries": str(len(db)),
        },
        engine=opts.engine,
        seconds=time.perf_counter() - started,
        target=tr.target.describe(),
        generated=generated,
        roles={s.path: where.role.get(s.key, scope.OTHER) for s in srcs},
        skipped=where.skipped,
        defines=opts.defines,
        includes={by_key[k][0].path: list(dict.fromkeys(t.path for _i, t, _h in v)) for k, v in resolved.items()},
    )


def resolve_includes(
    srcs: Sequence[_Source], procs: Sequence[_Processed], roots: Sequence[Path]
) -> dict[str, list[tuple[int, _Source, str]]]:
    """The project includes of every file: (index of the include, the file it resolves to, how: "local" beside
    the includer, "root" under a source root, "dir" through an include directory), by source path."""
    by_key = {s.key: (s, p) for s, p in zip(srcs, procs)}
    # Resolve project includes: includer dir first ("..."), then every source directory root.
    root_strs = [str(r) for r in roots]
    resolved: dict[str, list[tuple[int, _Source, str]]] = {}
    joined: dict[tuple[str, str], str] = {}  # (base, spelling) -> normalised path: most includes repeat

    def join(base: str, spelling: str) -> str:
        hit = joined.get((base, spelling))
        if hit is None:
            hit = joined[base, spelling] = os.path.normpath(os.path.join(base, spelling))
        return hit

    # An include found neither next to the includer nor under a source root is reached through an include
    # directory (-I) hipify is not told about, e.g. <helper_cuda.h> from a project's Common/: it resolves to
    # the one file of the tree whose path ends in the spelling (none or several: left alone).
    # A spelling the C/C++/POSIX system provides stays the system's, even when the project has a file of that
    # name (llm.c's Windows shim dev/unistd.h is not what <unistd.h> means on Linux).
    by_name: dict[str, list[_Source]] | None = None

    def by_suffix(spelling: str) -> _Source | None:
        nonlocal by_name
        parts = spelling.split("/")
        if ".." in parts or "." in parts or "" in parts or is_system_header(spelling):
            return None
        if by_name is None:
            by_name = {}
            for src in srcs:
                by_name.setdefault(src.path.name, []).append(src)
        tail = "/" + spelling
        hits = [c for c in by_name.get(parts[-1], ()) if c.key.endswith(tail)]
        if len(hits) != 1 or by_key[hits[0].key][1].mode == "error":
            return None
        return hits[0]

    for s, p in zip(srcs, procs):
        if not p.includes:
            continue
        links = []
        own_dir = str(s.path.parent)
        bases: list[tuple[str, bool]] = [(str(s.root), False)] if s.is_dir_root else []
        bases += [(r, False) for r in root_strs]
        for idx, (_a, _b, spelling, angled, _mapped, _line) in enumerate(p.includes):
            for base, local in ([] if angled else [(own_dir, True)]) + bases:
                found = by_key.get(join(base, spelling))
                if found is not None and found[1].mode != "error":
                    links.append((idx, found[0], "local" if local else "root"))
                    break
            else:
                target = by_suffix(spelling)
                if target is not None and target.path != s.path:
                    links.append((idx, target, "dir"))
        if links:
            resolved[s.key] = links

    return resolved


_SIMD_RECORD = ":hipify_compat.h"  # the state file's record of the generated compat header (no source has this key)
_ARCH_RULE = "cuda-arch-compare"
_NAME_KINDS = ("unsupported", "version", "unmapped", "deprecated")  # findings about a CUDA name


class _Scope:
    """Where findings count (tools/hipify/scope.py): each file's role, the branches the ROCm build does not compile
    (their findings are not reported), and the functions the compat header provides."""

    def __init__(
        self,
        srcs: Sequence[_Source],
        procs: Sequence[_Processed],
        resolved: Mapping[str, Sequence[tuple[int, _Source, str]]],
        tr: Translator,
        opts: HipifyOptions,
    ) -> None:
        keys = [s.key for s in srcs]
        trans = {s.key: p for s, p in zip(srcs, procs) if p.mode == "translate"}
        links = {k: [t.key for _i, t, _how in v] for k, v in resolved.items()}
        self.role = scope.roles(
            keys,
            links,
            [k for k, p in trans.items() if p.device],
            opts.cuda_units,
            [k for k, p in trans.items() if p.facts & insert.INCLUDES_CUDA or p.cuda_changed or _uses_cuda_names(p)],
        )
        envs = scope.environments(keys, links, self.role)
        self.branches = scope.Branches(
            {k: p.directives for k, p in trans.items()}, envs, opts.defines, tr.hip_name, tr.undefined_in_hip
        )
        # the includes that resolve to the project's own files (a cuda/x.cuh of its own is no CUDA-only header)
        by_key = {s.key: p for s, p in zip(srcs, procs)}
        self.own_includes = {k: {by_key[k].includes[i][2] for i, _t, _how in v} for k, v in resolved.items()}
        # The project's own definitions of what the compat header has count where the ROCm build compiles them: in
        # the files its units reach through includes on live lines (ggml's vendors/hip.h, included only under
        # `#if defined(GGML_USE_HIP)`, defines __vsubss4 for its hand port, not for a build without that macro).
        live = _reached_through_live_includes(trans, resolved, self.role, self.branches)
        self.simd_defined = {n for k, p in trans.items() if k in live for n in p.simd_defined}
        # A header the tree includes only on dead lines (a hand port's vendors/hip.h) is no CUDA unit's header: its
        # findings are the summary note of a file outside the CUDA build (a header nothing includes keeps its role:
        # a library's public header may be its users').
        for header in _included_only_on_dead_lines(trans, resolved, self.branches) - live:
            if self.role.get(header) == scope.CUDA_HEADER:
                self.role[header] = scope.OTHER
        self.provided = frozenset({n for p in trans.values() for n in p.simd_used} - self.simd_defined)
        self.skipped = 0

    def findings(self, path: Path, key: str, p: _Processed, project_macros: set[str]) -> list[Finding]:
        """The findings of one file as reported: none in dead branches; a function the compat header provides
        is a note; outside CUDA units and their headers, what would block is one note."""
        role = self.role.get(key, scope.OTHER)
        in_cuda = role in scope.CUDA_ROLES
        out: list[Finding] = []
        held: list[Finding] = []
        for line, col, name, raw_kind, raw_reason, raw_sugg, raw_blocking, rule in p.findings:
            kind, reason, sugg, blocking = raw_kind, raw_reason, raw_sugg, raw_blocking
            if kind == "unmapped" and name in project_macros:
                continue  # the project's own macro, not a CUDA API name
            if rule == "namespace" and name.split("::", 1)[0] in project_macros:
                continue  # a namespace of the project's own (namespace cuda { ... })
            if rule == "cuda-only-header" and (
                name in self.own_includes.get(key, ()) or os.path.isfile(os.path.join(os.path.dirname(key), name))
            ):
                continue  # the project's own header of that name (given, or beside the includer)
            if self.branches.is_dead(key, line) or (
                (kind in _NAME_KINDS or rule == _ARCH_RULE)
                and self.branches.in_condition(key, line)
                and not self.branches.matters(key, line, name, rule == _ARCH_RULE)
            ):
                self.skipped += 1
                continue
            if rule == _ARCH_RULE:
                own = self.branches.defined_at("__CUDA_ARCH__")
                if own is not None:
                    reason += (
                        f"; note: the project defines __CUDA_ARCH__ itself ({own[0]}:{own[1]}), which the translation "
                        "renames to __HIP_DEVICE_COMPILE__ too"
                    )
            if rule == "cuda-only-header" and kind == "hazard":
                row = table_row(name)
                if row is not None and row.compat and self.provided.issuperset(row.compat):
                    kind, blocking = "note", False
                    reason = simd.family(row.compat[0].encode("latin-1")).provided(f"<{name}>")
                    sugg = "none needed"
            if rule in simd.RULES:
                if name in self.simd_defined:
                    continue  # the project defines it (a hand port's compat header)
                if name in self.provided:
                    kind, blocking = "note", False
                    reason = simd.family(name.encode("latin-1")).provided(name)
                    sugg = "none needed"
            f = Finding(
                path,
                line,
                col,
                name,
                kind=kind,
                reason=reason,
                suggestion=sugg,
                blocking=blocking,
                rule=rule,
                in_cuda_unit=in_cuda,
            )
            # in CPU code nothing but an error blocks; in CUDA host code, assembly is the CPU's
            summarised = (not in_cuda and kind != "error") or (role == scope.CUDA_HOST and rule == "inline-asm")
            (held if blocking and summarised else out).append(f)
        if held:
            out.append(_outside_cuda(path, held, role == scope.CUDA_HOST))
        return out


def _uses_cuda_names(p: _Processed) -> bool:
    """Whether the translation found CUDA names in the file that it could not translate (unsupported, version,
    unmapped): evidence of CUDA host code, like an include of a CUDA header."""
    return any(f[3] in _NAME_KINDS for f in p.findings)


def _outside_cuda(path: Path, held: Sequence[Finding], host: bool = False) -> Finding:
    """One note for the findings that would block in CUDA code, in a file the build does not compile as CUDA (or,
    ``host``, the inline assembly of CUDA host code: the CPU's)."""
    by_what: dict[str, int] = {}
    for f in held:
        what = f.rule or f.kind
        by_what[what] = by_what.get(what, 0) + 1
    counts = ", ".join(f"{n} {what}" for what, n in sorted(by_what.items()))
    shown = ", ".join(f"{f.line}:{f.name}" for f in held[:10]) + (", ..." if len(held) > 10 else "")
    if host:
        where = (
            "in CUDA host code (a C/C++ file compiled against CUDA's headers by the host compiler): its assembly is "
            "the CPU's, not PTX"
        )
    else:
        where = (
            "in a file that no CUDA unit includes, with no device code and no CUDA header: the build compiles it with "
            "a host compiler, so CUDA's assembly and names do not block here"
        )
    return Finding(
        path,
        held[0].line,
        held[0].column,
        path.name,
        kind="note",
        reason=f"{len(held)} finding{'s' if len(held) > 1 else ''} ({counts}; {shown}) {where}",
        suggestion="if the build compiles this file as CUDA/HIP, give its suffix with --cuda-units (the build "
        "backend does) or include it from a .cu unit",
        blocking=False,
        rule="outside-cuda",
        in_cuda_unit=host,
    )


def _reached_through_live_includes(
    trans: Mapping[str, _Processed],
    resolved: Mapping[str, Sequence[tuple[int, _Source, str]]],
    role: Mapping[str, str],
    branches: scope.Branches,
) -> set[str]:
    """The translated files the tree's units (CUDA units and CUDA host units) reach through project includes whose
    ``#include`` line is not in a dead branch; every translated file when the tree has no unit."""
    units = [
        k
        for k in trans
        if role.get(k) == scope.CUDA_UNIT
        or (role.get(k) == scope.CUDA_HOST and os.path.splitext(k)[1].lower() in scope.UNIT_SUFFIXES)
    ]
    if not units:
        return set(trans)
    seen = set(units)
    todo = list(units)
    while todo:
        k = todo.pop()
        p = trans.get(k)
        for idx, target, _how in resolved.get(k, ()):
            if target.key in seen or p is None or branches.is_dead(k, p.includes[idx][5]):
                continue
            seen.add(target.key)
            todo.append(target.key)
    return seen


def _included_only_on_dead_lines(
    trans: Mapping[str, _Processed],
    resolved: Mapping[str, Sequence[tuple[int, _Source, str]]],
    branches: scope.Branches,
) -> set[str]:
    """The files the tree includes, every ``#include`` of which sits in a dead branch."""
    live_edge: dict[str, bool] = {}
    for k, edges in resolved.items():
        p = trans.get(k)
        for idx, target, _how in edges:
            alive = p is None or not branches.is_dead(k, p.includes[idx][5])
            live_edge[target.key] = live_edge.get(target.key, False) or alive
    return {k for k, alive in live_edge.items() if not alive}


def _additions(
    srcs: Sequence[_Source],
    procs: Sequence[_Processed],
    resolved: dict[str, list[tuple[int, _Source, str]]],
    sync_define: str | None,
    simd_provided: frozenset[str] = frozenset(),
    *,
    runtime_includes: int = 0,
) -> dict[str, tuple[str | None, bytes | None, bool, tuple[int, ...]]]:
    """The lines each translated file gets at its top: (the warp-sync macro to define, the runtime header to
    include, whether it includes the compat header, the indexes of the target's runtime includes it includes), by
    source path; files that need none are absent.

    - The runtime: a ``.cu`` file that uses CUDA names or includes a project header (a unit nvcc compiled with
      cuda_runtime.h included before anything else) gets ``<hip/hip_runtime.h>`` first unless its own first
      include already is that; another file with device code
      that does not include hip/hip_runtime.h itself, nor through a project header it includes (transitively, a
      header that gets the include counts), gets it too; a file with only runtime API names,
      ``<hip/hip_runtime_api.h>`` (unless it has either).
    - The macro (targets that need one): a file that uses the ``*_sync`` builtins, or includes a project header
      that does (transitively), and does not define the macro itself: the macro must come before the first
      HIP header of the translation unit, and a header's own definition may come too late.
    - The compat header: a file that uses one of the functions it provides (``simd_provided``).
    - The runtime includes (the first ``runtime_includes`` of the target's, data/targets.tsv ``runtime-include``:
      ``<math.h>`` for ``isfinite(x)`` & co., ``<string.h>`` for ``memset`` on HIP >= 7.0, ...): a file that has the
      whole runtime (its own include or the added one) and calls one of a header's names unqualified, or includes a
      header without the runtime that does, and does not include that header, itself or through a project header
      (transitively): nvcc's cuda_runtime.h includes those headers, the target's hip_runtime.h does not declare
      their names for host code."""
    facts = {s.key: p.facts if p.mode == "translate" else 0 for s, p in zip(srcs, procs)}
    uses_simd = {
        s.key for s, p in zip(srcs, procs) if p.mode == "translate" and simd_provided.intersection(p.simd_used)
    }
    links = {k: [t.key for _i, t, _l in v] for k, v in resolved.items()}
    out: dict[str, tuple[str | None, bytes | None, bool, tuple[int, ...]]] = {}

    def closure(start: str, bit: int, extra: dict[str, bool] | None = None) -> bool:
        """Whether ``start`` or a header it includes (transitively) has ``bit`` (or ``extra``'s flag)."""
        seen = {start}
        todo = [start]
        while todo:
            k = todo.pop()
            if facts.get(k, 0) & bit or (extra is not None and extra.get(k, False)):
                return True
            for nxt in links.get(k, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    # the runtime: decided for included headers before their includers (a header that gets the include
    # provides it); a cycle is broken by the order of the walk
    gets: dict[str, bytes | None] = {}
    provided: dict[str, bool] = {}  # the files that get a runtime header: whether it is the whole runtime
    provided_api: dict[str, bool] = {}  # the same files: each provides the API
    visiting: set[str] = set()

    def runtime_for(k: str) -> bytes | None:
        if k in gets:
            return gets[k]
        if k in visiting:
            return None
        visiting.add(k)
        for nxt in links.get(k, ()):
            runtime_for(nxt)
        f = facts.get(k, 0)
        has_runtime = closure(k, insert.HAS_RUNTIME, provided)
        header: bytes | None = None
        if (
            k.endswith(".cu")
            and not f & insert.RUNTIME_FIRST
            and (f & (insert.USES_DEVICE | insert.USES_API) or links.get(k))
        ):
            # a translation unit nvcc compiled that uses CUDA or project headers: cuda_runtime.h came first,
            # before every header it includes, and headers test for it (#ifdef __CUDA_RUNTIME_H__, which is
            # HIP_INCLUDE_HIP_HIP_RUNTIME_H after translation: cuda-samples' helper_cuda.h)
            header = insert.RUNTIME_HEADER
        elif f & insert.USES_DEVICE and not has_runtime:
            header = insert.RUNTIME_HEADER
        elif f & insert.USES_API and not has_runtime:
            if not closure(k, insert.HAS_RUNTIME_API | insert.HAS_RUNTIME, provided_api):
                header = insert.RUNTIME_API_HEADER
        gets[k] = header
        if header is not None:
            provided[k] = header == insert.RUNTIME_HEADER
            provided_api[k] = True
        visiting.discard(k)
        return header

    for k in facts:
        runtime_for(k)

    # the runtime includes: nvcc's runtime header includes them, the target's does not (for the host): a file that
    # has the runtime (its own include or the one added) gets one when it, or a header it includes that has not
    # the runtime itself, calls its names unqualified (and it does not include it itself)
    def has_runtime(k: str) -> bool:
        return bool(facts[k] & insert.HAS_RUNTIME) or gets.get(k) == insert.RUNTIME_HEADER

    # (a header is provided by the file's own include or by a project header it includes, transitively: cuda-samples'
    # helper_image.h has <string.h> through helper_string.h)
    runtime = {k: has_runtime(k) for k in facts}
    bare = [
        {
            k: not runtime[k] and bool(f & insert.uses_include(i)) and not closure(k, insert.has_include(i))
            for k, f in facts.items()
        }
        for i in range(runtime_includes)
    ]
    for k, f in facts.items():
        header = gets.get(k)
        define = None
        if sync_define is not None and not f & insert.DEFINES_SYNC and closure(k, insert.USES_SYNC):
            define = sync_define
        c_headers = tuple(
            i
            for i in range(runtime_includes)
            if runtime[k]
            and not f & insert.has_include(i)
            and (bool(f & insert.uses_include(i)) or closure(k, 0, bare[i]))
            and not closure(k, insert.has_include(i))
        )
        if header is not None or define is not None or k in uses_simd or c_headers:
            out[k] = (define, header, k in uses_simd, c_headers)
    return out


def _addition_findings(
    path: Path,
    line: int,
    define: str | None,
    header: bytes | None,
    hip_version: tuple[int, ...] | None,
    *,
    guarded: bool = False,
) -> list[Finding]:
    target = ".".join(map(str, hip_version)) if hip_version else "(newest)"
    found = []
    if define is not None:
        found.append(
            Finding(
                path,
                line,
                1,
                define,
                kind="note",
                reason=f"#define {define} added before the HIP headers: HIP {target} declares the warp *_sync "
                "builtins and __activemask only with it (amd_warp_sync_functions.h); this file or a header it "
                "includes uses them",
                suggestion="none needed; or build with -D" + define,
                blocking=False,
                rule="warp-sync-define",
            )
        )
    if header is not None:
        name = header.decode("ascii")
        why = "device code" if header == insert.RUNTIME_HEADER else "HIP runtime API names"
        found.append(
            Finding(
                path,
                line,
                1,
                name,
                kind="note",
                reason=f"#include <{name}> added: the file uses {why} without including it (nvcc includes the "
                "CUDA runtime implicitly; HIP-Clang does not)"
                + (
                    "; inside the guard that holds its CUDA code, so a host C/C++ compiler does not see it"
                    if guarded
                    else ""
                ),
                suggestion="none needed; or include it in the CUDA source",
                blocking=False,
                rule="runtime-include",
            )
        )
    return found


def _relative(target: str, base: str) -> str:
    """``os.path.relpath`` for two absolute, normalised paths, ``/``-separated (without its two abspath
    calls: the tree pass asks for every project include)."""
    if os.sep != "/":
        return os.path.relpath(target, base).replace(os.sep, "/")
    t = [part for part in target.split("/") if part]
    b = [part for part in base.split("/") if part]
    common = 0
    for x, y in zip(t, b):
        if x != y:
            break
        common += 1
    return "/".join([".."] * (len(b) - common) + t[common:]) or "."


def _apply_external(res: _Processed, ext: Callable[[str, bytes], bytes]) -> None:
    """Replace the built-in translation by the external engine's (the report stays the built-in one's)."""
    if res.mode != "translate":
        return
    original = Path(res.path).read_bytes()
    res.data = ext(res.path, original)
    res.changed = res.data != original
    found = list(re.finditer(_INCLUDE_LINE, res.data, re.M))
    lines = positions(res.data, [m.start(2) for m in found])
    res.includes = [
        (m.start(2), m.end(2), m.group(2).decode("latin-1"), m.group(1) == b"<", False, lines[m.start(2)][0])
        for m in found
    ]
    res.locate_insertion()


def _from_cache(path: str, entry: object) -> _Processed | None:
    """The previous run's result for ``path`` when the file's content hash is unchanged."""
    if not isinstance(entry, dict) or entry.get("mode") not in ("translate", "copy"):
        return None
    try:
        with open(path, "rb") as fh:
            sha = file_sha256_hex(fh)
    except OSError:
        return None
    if sha != entry.get("sha"):
        return None
    try:
        res = _Processed(path)
        res.mode = str(entry["mode"])
        res.sha = sha
        res.data = None
        res.changed = bool(entry["changed"])
        res.findings = [
            (int(f[0]), int(f[1]), str(f[2]), str(f[3]), str(f[4]), str(f[5]), bool(f[6]), str(f[7]))
            for f in entry["findings"]
        ]
        res.includes = [(int(i[0]), int(i[1]), str(i[2]), bool(i[3]), bool(i[4]), int(i[5])) for i in entry["includes"]]
        res.defines = [str(d) for d in entry["defines"]]
        res.facts, res.insert_at, res.insert_line = (int(x) for x in entry["facts"])
        res.unresolved = [str(n) for n in entry["unresolved"]]
        res.cuda_changed = bool(entry["cuda_changed"])
        res.directives = [
            (k, int(a), int(b), t) for k, a, b, t in (d.split("\t") for d in str(entry["directives"]).split("\n") if d)
        ]
        res.device = bool(entry["device"])
        res.simd_used, res.simd_defined = ([str(n) for n in part] for part in entry["simd"])
        res.guard, res.guard_at, res.guard_line = (int(x) for x in entry["guard"])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return res
