"""One Settings object from three sources, in this order of precedence (first wins):

1. config settings: ``pip install . -C platform=rocm`` / ``python -m build -C archs=80;90``;
2. the environment: ``MONARCH_<KEY>`` with the key upper-cased and ``-`` as ``_`` (``MONARCH_BUILD_DIR``);
3. ``[tool.monarch-runtime]`` in pyproject.toml;
4. the defaults below.

The platform itself is further resolved from ``CUDA_HOME``/``ROCM_HOME`` in toolchain.py when it is
``auto``. Every key is validated here; an unknown key is an error that lists the valid ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from buildcore.errors import BuildError

PLATFORMS = ("auto", "cpu", "cuda", "rocm")
# The compiler caches the compiler-launcher setting knows (buildcore/toolchain/launcher.py finds them).
COMPILER_LAUNCHERS = ("ccache", "sccache")
# ccache for the bridge's compilers (and the cc crate's C), sccache for rustc: what hits from a fresh clone elsewhere.
BOTH_LAUNCHERS = "ccache+sccache"
_LAUNCHER_OFF = frozenset({"none", "", "false", "no", "off", "0"})

# key -> (description, default shown in docs)
KEYS: dict[str, str] = {
    "platform": "auto | cpu | cuda | rocm (auto: ROCM_HOME/ROCM_PATH -> rocm, CUDA_HOME/CUDA_PATH -> cuda, else cpu)",
    "archs": "GPU architectures, ';' or ',' separated (CUDA: 80;90, ROCm: gfx90a;gfx940), or native: this machine's",
    "build-dir": "where intermediate files go (default: build/<platform> in the source tree)",
    "debug": "true keeps symbols and builds without optimisation (default false)",
    "hip-version": "HIP version X.Y that hipify targets (default: the version of the ROCm found)",
    "jobs": "parallel compile jobs (default: the number of CPUs)",
    "repair": "true runs auditwheel for a truthful manylinux tag (default); false keeps a local linux_* tag",
    "variant": "auto | hash | LABEL: a WheelNext variant wheel with *.dist-info/variant.json (default: a plain wheel)",
    "compiler-launcher": "ccache | sccache | ccache+sccache | none: a compiler cache in front of the bridge's "
    "compilers and rustc (ccache+sccache: ccache for the bridge, sccache for rustc; default none; "
    "CMAKE_<LANG>_COMPILER_LAUNCHER and RUSTC_WRAPPER in the environment win for their language)",
}

_ARCH = re.compile(r"^[A-Za-z0-9_:+\-]+$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


# The variant setting (build_backend/variant.py makes the wheel; its request is parsed here, with the rest).
VARIANT_AUTO = "auto"  # label and properties from the toolchain
VARIANT_HASH = "hash"  # properties from the toolchain, label = variantlib's hash of them (its default)
_VARIANT_OFF = frozenset({"", "false", "no", "off", "0"})  # a plain wheel, as if unset
_VARIANT_ON = frozenset({"true", "yes", "on", "1"})  # the same as auto
# PEP 825 and variantlib's VALIDATION_VARIANT_LABEL_REGEX (checked again there).
VARIANT_LABEL_RE = re.compile(r"[0-9a-z._]+")


@dataclass(frozen=True)
class Settings:
    platform: str = "auto"
    archs: tuple[str, ...] = ()
    build_dir: Path | None = None
    debug: bool = False
    hip_version: tuple[int, int] | None = None
    jobs: int | None = None
    repair: bool = True
    variant: str | None = None  # None: a plain wheel; else auto, hash or a variant label (variant.py)
    compiler_launcher: str | None = None  # None: none; else ccache, sccache or ccache+sccache (toolchain/launcher.py)
    sources: Mapping[str, str] | None = None  # key -> where its value came from, for messages

    def origin(self, key: str) -> str:
        return (self.sources or {}).get(key, "default")


def _env_name(key: str) -> str:
    return "MONARCH_" + key.upper().replace("-", "_")


def _as_text(key: str, value: object, origin: str) -> str:
    if isinstance(value, list):
        if len(value) != 1:
            raise BuildError(f"{key} was given {len(value)} times in {origin}; give it once.")
        value = value[0]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    raise BuildError(f"{key} in {origin} must be a string, not {type(value).__name__}.")


def _parse_bool(key: str, text: str, origin: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise BuildError(f"{key}={text!r} (from {origin}) is not a boolean: use true or false.")


def _parse_archs(text: str, origin: str) -> tuple[str, ...]:
    archs = tuple(a.strip() for a in re.split(r"[;,\s]+", text) if a.strip())
    for arch in archs:
        if not _ARCH.match(arch):
            raise BuildError(
                f"archs contains {arch!r} (from {origin}), which is not an architecture name. "
                "Use names like 80;90 for CUDA or gfx90a;gfx940 for ROCm."
            )
    if not archs:
        raise BuildError(f"archs (from {origin}) is empty; leave it unset to use the defaults.")
    return archs


def _parse_version(text: str, origin: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if not m:
        raise BuildError(f"hip-version={text!r} (from {origin}) is not X.Y, e.g. 5.2 or 6.4.")
    return int(m.group(1)), int(m.group(2))


def load(
    config_settings: Mapping[str, object] | None,
    environ: Mapping[str, str],
    pyproject: Mapping[str, object],
) -> Settings:
    raw: dict[str, tuple[str, str]] = {}  # key -> (text, origin)
    tool = pyproject.get("tool", {})
    table = tool.get("monarch-runtime", {}) if isinstance(tool, dict) else {}
    for key, value in (table if isinstance(table, dict) else {}).items():
        if key == "version":  # the base version, read by the metadata stage
            continue
        _check_key(key, "[tool.monarch-runtime] in pyproject.toml")
        raw[key] = (_as_text(key, value, "pyproject.toml"), "pyproject.toml")
    for key in KEYS:
        env_name = _env_name(key)
        if env_name in environ:
            raw[key] = (environ[env_name], f"the environment variable {env_name}")
    for key, value in (config_settings or {}).items():
        # pip and build pass --config-settings through untouched; "--" options belong to others.
        if key.startswith("-"):
            continue
        _check_key(key, "the config settings (-C)")
        raw[key] = (_as_text(key, value, f"-C {key}"), f"-C {key}")

    fields: dict[str, object] = {}
    for key, (text, origin) in raw.items():
        if key == "platform":
            platform = text.strip().lower()
            if platform not in PLATFORMS:
                raise BuildError(f"platform={text!r} (from {origin}) is not one of {', '.join(PLATFORMS)}.")
            fields["platform"] = platform
        elif key == "archs":
            fields["archs"] = _parse_archs(text, origin)
        elif key == "build-dir":
            if not text.strip():
                raise BuildError(f"build-dir (from {origin}) is empty.")
            fields["build_dir"] = Path(text).expanduser()
        elif key in ("debug", "repair"):
            fields[key] = _parse_bool(key, text, origin)
        elif key == "hip-version":
            fields["hip_version"] = _parse_version(text, origin)
        elif key == "jobs":
            if not text.strip().isdigit() or int(text) < 1:
                raise BuildError(f"jobs={text!r} (from {origin}) must be a whole number of at least 1.")
            fields["jobs"] = int(text)
        elif key == "variant":
            fields["variant"] = parse_variant(text, origin)
        elif key == "compiler-launcher":
            fields["compiler_launcher"] = parse_compiler_launcher(text, origin)
    fields["sources"] = {k: origin for k, (_, origin) in raw.items()}
    return Settings(**fields)  # type: ignore[arg-type]


def _check_key(key: str, origin: str) -> None:
    if key not in KEYS:
        valid = "\n".join(f"  {k}: {desc}" for k, desc in KEYS.items())
        raise BuildError(f"unknown setting {key!r} in {origin}. The valid settings are:\n{valid}")


def parse_compiler_launcher(text: str, origin: str) -> str | None:
    """The ``compiler-launcher`` setting: ccache, sccache or ccache+sccache, or None for none (also an empty
    value or false/no/off/0). Whether the programs are there is detection's question (toolchain/launcher.py)."""
    choice = text.strip().lower().replace(" ", "")
    if choice in _LAUNCHER_OFF:
        return None
    if choice in (*COMPILER_LAUNCHERS, BOTH_LAUNCHERS):
        return choice
    raise BuildError(
        f"compiler-launcher={text!r} (from {origin}) is not a compiler cache this build knows: use "
        f"{', '.join(COMPILER_LAUNCHERS)} or {BOTH_LAUNCHERS} (or none). Another program can still be put in "
        "front of the compilers with CMAKE_<LANG>_COMPILER_LAUNCHER (LANG = CXX, CUDA or HIP) and RUSTC_WRAPPER in the "
        "environment."
    )


def parse_variant(text: str, origin: str) -> str | None:
    """The ``variant`` setting, checked before anything is built: None (a plain wheel) for an empty
    value or false/no/off/0, else ``auto`` (also for true/yes/on/1), ``hash`` or a custom label.
    Needs no variantlib."""
    request = text.strip()
    if request.lower() in _VARIANT_OFF:
        return None
    if request.lower() in _VARIANT_ON:
        return VARIANT_AUTO
    if "::" in request:
        raise BuildError(
            f"variant={request!r} (from {origin}) looks like a variant property. The properties are derived "
            "from the toolchain (CUDA version and sm_arch, ROCm version and gfx_arch; none for the CPU build); "
            "the variant setting takes only the label: auto (cu13, rocm5.2 or null), hash (variantlib's hash "
            "of the properties) or a label of your own made of 0-9, a-z, '_' and '.'."
        )
    if not VARIANT_LABEL_RE.fullmatch(request):
        raise BuildError(
            f"variant={request!r} (from {origin}) is not a valid variant label: a label may hold only "
            "0-9, a-z, '_' and '.' (PEP 825), e.g. cu13 or rocm5.2. Use auto to derive it from the toolchain, "
            "hash for variantlib's hash of the properties, or leave the setting empty for a plain wheel."
        )
    return request
