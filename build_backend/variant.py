"""Wheel variants (WheelNext drafts: PEP 817, split into PEP 825 "package format" and PEP 850 "providers").

A variant wheel is the plain wheel plus a variant label as the last component of its file name and a
``*.dist-info/variant.json`` naming the variant's properties (``namespace :: feature :: value``) and
the provider plugin that an installer asks whether this machine supports them. ``variant.json`` is made
by ``variantlib`` (PyPI), imported only when a variant is requested, so plain builds never need it.

The properties come from the Toolchain, in the namespaces and features of the vendors' providers:

* CUDA (nvidia-variant-provider): ``nvidia :: cuda_version_lower_bound :: 13.5`` (the toolkit built
  with, as PyTorch's variant wheels do) and ``nvidia :: sm_arch :: 80_real`` per architecture (the
  build emits machine code only, no PTX, so there is no ``_virtual`` value);
* ROCm (AMD's rocm-bootstrap): ``amd :: gfx_arch :: gfx942`` per architecture that AMD's plugin knows,
  asked of the plugin itself at build time (through variantlib, as an installer asks it). The plugin
  reports no ROCm version, so none is a property: a variant with a feature the plugin never reports is
  never selected;
* CPU: no property at all, i.e. the *null variant*, whose label is always ``null``: the fallback an
  installer picks when no GPU variant is supported.

All variants of one release share one version, so a variant wheel drops the local version of the plain
wheel (``0.1.0+cu13`` -> ``0.1.0``); the label carries that name instead (``auto``: ``cu13``,
``rocm5.2``, ``null``). See docs/wheels.md.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import stat
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

from build_backend import log, wheel
from buildcore.errors import BuildError
from buildcore.settings import VARIANT_AUTO, VARIANT_HASH, parse_variant

if TYPE_CHECKING:
    from buildcore.toolchain import Toolchain

VARIANT_FILE = "variant.json"
REQUIREMENT = "variantlib>=0.2"
NULL_LABEL = "null"
# PEP 825 and variantlib's VALIDATION_VALUE_REGEX (checked again there).
VALUE_RE = re.compile(r"[0-9a-z._]+")

# namespace -> (provider requirement, plugin API), in the order of default-priorities. Every variant.json of
# a release (the CPU null variant too) declares all of them, so an index can merge them into one
# {name}-{version}-variants.json (they must agree there).
# - nvidia: WheelNext's provider, published on WheelNext's own index; PyPI holds only a placeholder
#   (nvidia-variant-provider 0.0.0a0, no plugin module), which this requirement excludes.
# - amd: AMD's own provider, rocm-bootstrap on PyPI (entry point variant_plugins: amd = this plugin API);
#   ROCm variant builds ask it for the gfx_arch values, so it is also a build requirement for them.
PROVIDERS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "nvidia": ("nvidia-variant-provider>=0.0.1,<1.0.0", "nvidia_variant_provider.plugin:NvidiaVariantPlugin"),
        "amd": ("rocm-bootstrap>=0.3.0,<1.0.0", "rocm_bootstrap.variant_provider:AMDVariantPlugin"),
    }
)
AMD_PROVIDER_DIST = "rocm-bootstrap"


def build_requirements(platform: str) -> list[str]:
    """What a variant build of ``platform`` needs in its build environment (get_requires_for_build_wheel):
    variantlib, and for ROCm AMD's provider plugin, which names the gfx_arch values."""
    return [REQUIREMENT, PROVIDERS["amd"][0]] if platform == "rocm" else [REQUIREMENT]


def variant_properties(toolchain: Toolchain) -> list[str]:
    """The variant properties of a build, sorted, as ``namespace :: feature :: value`` strings. For ROCm
    this asks AMD's provider plugin (see gfx_arch_values), so it needs variantlib and rocm-bootstrap."""
    if toolchain.platform == "cpu":
        return []
    if toolchain.version is None:
        raise BuildError(f"the {toolchain.platform} toolchain has no version, so no variant property can name it.")
    version = f"{toolchain.version[0]}.{toolchain.version[1]}"
    if toolchain.platform == "cuda":
        props = [("nvidia", "cuda_version_lower_bound", version)]
        props += [("nvidia", "sm_arch", f"{arch}_real") for arch in toolchain.archs]
    elif toolchain.platform == "rocm":
        props = [("amd", "gfx_arch", arch) for arch in toolchain.archs]
    else:
        raise BuildError(f"no variant properties are defined for the platform {toolchain.platform!r}.")
    for namespace, feature, value in props:
        if not VALUE_RE.fullmatch(value):
            raise BuildError(
                f"the architecture or version {value!r} cannot be a variant property value ({namespace} :: "
                f"{feature}), which may hold only 0-9, a-z, '_' and '.'. Build a variant with plain "
                "architecture names (e.g. gfx90a rather than gfx90a:xnack-), or build a plain wheel."
            )
    if toolchain.platform == "rocm":
        props = [("amd", "gfx_arch", value) for value in gfx_arch_values(toolchain.archs)]
    return sorted(f"{n} :: {f} :: {v}" for n, f, v in set(props))


def gfx_arch_values(archs: Sequence[str]) -> list[str]:
    """The ``amd :: gfx_arch`` values of a ROCm build: those of ``archs`` that AMD's provider plugin lists
    (its get_all_configs, asked through variantlib's validate_variant, as ``variantlib make-variant``
    checks properties). An arch it does not list can never be reported for any machine, so no installer
    could select the variant on it: it is left out, with a line in the log (rocm-bootstrap 0.3 knows no
    gfx940). None left is an error: the variant would have no property, i.e. pass for the null variant."""
    api, models, _ = _variantlib()
    plugin_error = importlib.import_module("variantlib.errors").PluginError
    candidates = [api.VariantProperty("amd", "gfx_arch", arch) for arch in archs]
    try:
        result: Any = api.validate_variant(api.VariantDescription(properties=candidates), _variant_info(models))
    except plugin_error as err:
        lines = str(err).strip().splitlines()  # the plugin's subprocess traceback: its last line says why
        raise BuildError(
            f"a ROCm variant names its archs as AMD's provider plugin ({PROVIDERS['amd'][1]}) reports them, "
            f"but the plugin could not be run: {lines[-1] if lines else err}. Install it into the build "
            f"environment (pip install '{PROVIDERS['amd'][0]}'; it needs Python 3.10 or newer), or build with "
            "build isolation, where the backend asks for it; or drop the variant setting for a plain wheel."
        ) from None
    if result.multi_value_violations:
        raise BuildError(
            f"AMD's provider plugin ({_amd_provider_version()}) declares amd :: gfx_arch single-valued, so a "
            f"variant cannot name the {len(archs)} archs {';'.join(archs)}. Build one arch per variant, or a "
            "plain wheel."
        )
    known = [arch for arch, prop in zip(archs, candidates) if result.results.get(prop)]
    unknown = [arch for arch in archs if arch not in known]
    if not known:
        raise BuildError(
            f"none of the archs {';'.join(archs)} is a gfx_arch value that AMD's provider plugin "
            f"({_amd_provider_version()}) knows, so no installer would ever select this variant. Build for an "
            "arch it lists (gfx90a, gfx942, gfx950, ...), or build a plain wheel."
        )
    if unknown:
        them = "it" if len(unknown) == 1 else "them"
        log.info(
            f"variant: {', '.join(unknown)} left out of the variant's gfx_arch values: AMD's provider plugin "
            f"({_amd_provider_version()}) does not know {them}, so no installer would select on {them}; the "
            "wheel still carries the code objects"
        )
    return known


def _amd_provider_version() -> str:
    try:
        return f"{AMD_PROVIDER_DIST} {importlib.metadata.version(AMD_PROVIDER_DIST)}"
    except importlib.metadata.PackageNotFoundError:
        return AMD_PROVIDER_DIST


def variant_label(toolchain: Toolchain, request: str) -> str | None:
    """The label a request gives, or None for ``hash`` (variantlib computes it)."""
    request = parse_variant(request, "the variant request") or VARIANT_AUTO
    if toolchain.platform == "cpu":
        if request not in (VARIANT_AUTO, VARIANT_HASH, NULL_LABEL):
            raise BuildError(
                f"variant={request!r}: the CPU build has no variant property, so it is the null variant, "
                "whose label is always 'null' (PEP 825). Use variant=auto for the CPU build, or a plain wheel."
            )
        return NULL_LABEL
    if request == VARIANT_AUTO:
        return toolchain.local_label
    if request == VARIANT_HASH:
        return None
    if request == NULL_LABEL:
        raise BuildError(
            f"variant=null: the label 'null' belongs to the null variant (no properties), but the "
            f"{toolchain.platform} build has properties. Use variant=auto ({toolchain.local_label}) or another label."
        )
    return request


def _variantlib() -> tuple[ModuleType, ModuleType, ModuleType]:
    try:
        return (
            importlib.import_module("variantlib.api"),
            importlib.import_module("variantlib.models.variant_info"),
            importlib.import_module("variantlib.variant_dist_info"),
        )
    except ImportError as err:
        raise BuildError(
            f"a variant wheel was requested, but variantlib cannot be imported ({err}). Install it into the "
            f"build environment (pip install '{REQUIREMENT}'; it needs Python 3.10 or newer), or build with "
            "build isolation, where the backend asks for it; or drop the variant setting for a plain wheel."
        ) from None


def _variant_info(models: ModuleType) -> Any:
    """The providers part of variant.json: every variant of a release declares the same (see PROVIDERS)."""
    namespaces = list(PROVIDERS)
    return models.VariantInfo(
        namespace_priorities=namespaces,
        providers={
            ns: models.ProviderInfo(requires=[PROVIDERS[ns][0]], plugin_api=PROVIDERS[ns][1]) for ns in namespaces
        },
    )


def variant_dist_info(toolchain: Toolchain, request: str) -> tuple[str, list[str], bytes]:
    """(label, properties, content of variant.json) for a build, made and read back by variantlib."""
    label = variant_label(toolchain, request)
    properties = variant_properties(toolchain)
    api, models, dist_info = _variantlib()
    try:
        vdesc: Any = api.VariantDescription(
            properties=[api.VariantProperty.from_str(p) for p in properties], label=label or ""
        )
        text = str(api.make_variant_dist_info(vdesc, variant_info=_variant_info(models)))
        dist_info.VariantDistInfo(text, expected_label=str(vdesc.label))  # variantlib's own validation
    except ValueError as err:  # variantlib's ValidationError
        raise BuildError(f"variantlib rejected the variant {label or '(hash)'} {properties}: {err}") from None
    return str(vdesc.label), properties, text.encode()


def make_variant_wheel(plain: Path, toolchain: Toolchain, request: str, out_dir: Path) -> Path:
    """Turn the plain wheel ``plain`` (as write_wheel made it) into the variant wheel in ``out_dir``:
    the variant label appended to the file name, the local version dropped (METADATA, the dist-info
    directory and build_info.json, which also records the variant), ``variant.json`` added, RECORD
    rewritten; deterministic and atomic like every wheel write_wheel makes. The plain wheel is removed
    when it lies in ``out_dir``, so it is not left next to the variant one."""
    label, properties, variant_json = variant_dist_info(toolchain, request)
    stem = plain.name[: -len(".whl")] if plain.name.endswith(".whl") else ""
    parts = stem.split("-")
    if len(parts) != 5 or parts[0] != wheel.DIST:
        raise BuildError(
            f"{plain.name} is not a plain {wheel.DIST} wheel name ({wheel.DIST}-VERSION-{wheel.ABI_TAG}-PLATFORM.whl); "
            "a variant is made from the plain wheel of this backend, once."
        )
    version, tag = parts[1], parts[4]
    base = version.split("+", 1)[0]
    old_info, new_info = wheel.dist_info(version), wheel.dist_info(base)
    files: dict[str, Path | bytes] = {}
    executables: list[str] = []
    metadata_text: str | None = None
    try:
        with zipfile.ZipFile(plain) as zf:
            for item in zf.infolist():
                name = item.filename
                if name.endswith("/"):
                    continue
                data = zf.read(item)
                if name.startswith(f"{old_info}/"):
                    leaf = name[len(old_info) + 1 :]
                    if leaf == "METADATA":
                        metadata_text = data.decode("utf-8")
                    if leaf in ("METADATA", "WHEEL", "RECORD", VARIANT_FILE):  # written anew below
                        continue
                    name = f"{new_info}/{leaf}"
                if (item.external_attr >> 16) & stat.S_IXUSR:
                    executables.append(name)
                files[name] = data
    except (OSError, zipfile.BadZipFile) as err:
        raise BuildError(f"cannot read the wheel {plain} to make a variant of it: {err}.") from None
    if metadata_text is None:
        raise BuildError(f"{plain.name} has no {old_info}/METADATA, so no variant can be made of it.")
    header, sep, body = metadata_text.partition("\n\n")
    lines = header.split("\n")
    if f"Version: {version}" not in lines:
        raise BuildError(f"{plain.name}: its METADATA does not say 'Version: {version}' as its file name does.")
    lines = [f"Version: {base}" if line == f"Version: {version}" else line for line in lines]
    metadata = wheel.RawMetadata(version=base, text="\n".join(lines) + sep + body)
    files[f"{new_info}/{VARIANT_FILE}"] = variant_json
    build_info_name = f"{wheel.PACKAGE}/build_info.json"
    build_info = files.get(build_info_name)
    if isinstance(build_info, bytes):  # the version it records is the installed one; and it names the variant
        info = json.loads(build_info)
        info["version"] = base
        info["variant"] = {"label": label, "properties": properties}
        files[build_info_name] = wheel.build_info_json(info)
    target = wheel.write_wheel(out_dir, metadata, tag, files, executables=executables, quiet=True, label=label)
    if plain.resolve() != target.resolve() and plain.parent.resolve() == out_dir.resolve():
        plain.unlink()
    log.info(f"variant: {target.name}: label {label}; " + ("; ".join(properties) or "null variant (no properties)"))
    return target
