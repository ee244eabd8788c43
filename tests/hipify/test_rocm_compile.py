"""Real compiles for current ROCm, in the roots ci/rocm-root.sh makes (tests/_roots.py: skipped when a root is
missing, a failure under MONARCH_TEST_REQUIRE_ROOTS=1): kernels that use the warp *_sync builtins with 32-bit
masks (and discard two hipError_t results: translated with --void-discarded), and the csrc/ bridge (which checks
its errors: translated with the defaults), hipified for HIP 6.4 and 7.2, compile for gfx942 with -Wall -Wextra
-Werror. The same kernels translated naively (masks left 32-bit; no warp-sync macro on 6.4) must fail, and so must
their default translation (the discarded results left as written: [[nodiscard]] warns), so the test can."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from _roots import ROCM_ROOT_VERSIONS, require_root, run_in_root
from _support import ROOT, TOOLCHAINS

from tools.hipify import HipifyOptions, hipify_tree

DATA = Path(__file__).resolve().parent / "data" / "warp_sync"
CLANG = {"6.4": "clang++-21", "7.2": "clang++-22"}
# what the naive translation runs into: HIP 7.2's static_assert on the mask's size; HIP 6.4 without the macro
NAIVE_ERROR = {"6.4": "use of undeclared identifier '__shfl", "7.2": "The mask must be a 64-bit integer"}
RCCL_INCLUDE = TOOLCHAINS / "rccl" / "usr" / "include"  # RCCL's header for HIP 6.4 (its root has no RCCL)


def _naive(text: str, version: str) -> str:
    """The translation as it was before the target rules: masks kept 32-bit, no macro."""
    text = text.replace("0xffffffffffffffffULL", "0xffffffff").replace(" | 0xffffffff00000000ULL", "")
    if version == "6.4":
        text = re.sub(
            r"#ifndef HIP_ENABLE_WARP_SYNC_BUILTINS[^\n]*\n#define HIP_ENABLE_WARP_SYNC_BUILTINS\n#endif\n", "", text
        )
    return text


@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_hipified_for_the_target_compiles_warning_free(tmp_path: Path, version: str) -> None:
    require_root(version)
    target = tuple(int(x) for x in version.split("."))
    opts = HipifyOptions(hip_version=(target[0], target[1]), jobs=1)
    kernels = tmp_path / "kernels"
    void_opts = HipifyOptions(hip_version=(target[0], target[1]), jobs=1, void_discarded=True)
    res = hipify_tree([DATA / "kernels.cu", DATA / "warp.cuh"], kernels, void_opts)
    assert not [f for f in res.findings if f.blocking and f.rule != "ballot-32"], [str(f) for f in res.findings]
    discarded = tmp_path / "discarded"
    hipify_tree([DATA / "kernels.cu", DATA / "warp.cuh"], discarded, opts)
    bridge = tmp_path / "csrc"
    bridge_res = hipify_tree([ROOT / "csrc"], bridge, opts)
    assert bridge_res.blocking == 0
    assert not [f for f in bridge_res.findings if f.rule.startswith("nodiscard")]  # csrc/ checks its errors
    naive = tmp_path / "naive"
    naive.mkdir()
    for name in ("kernels.hip", "warp_hip.cuh"):
        (naive / name).write_text(_naive((kernels / name).read_text(encoding="utf-8"), version), encoding="utf-8")

    flags = ["-x", "hip", "--offload-arch=gfx942", "-std=c++17", "-fPIC", "-Wall", "-Wextra", "-Werror"]
    bridge_flags = ['-DMONARCH_COLLECTIVE_SONAME="librccl.so.1"', f"-I{bridge}"]
    if RCCL_INCLUDE.is_dir():
        bridge_flags.append(f"-I{RCCL_INCLUDE}")
    units = {
        "kernels": (kernels / "kernels.hip", []),
        "naive": (naive / "kernels.hip", []),
        "discarded": (discarded / "kernels.hip", []),
        "checksum": (bridge / "checksum.hip", bridge_flags),
        "collectives": (bridge / "collectives.hip", bridge_flags),
    }
    # one shell in the root for all four (each entry into a root costs its mounts)
    script = "".join(
        f"{shlex.join([CLANG[version], *flags, *extra, '-c', '-o', '/dev/null', str(src)])} 2>&1; "
        f"echo '@@ {name} rc='$?; "
        for name, (src, extra) in units.items()
    )
    ro = [RCCL_INCLUDE] if RCCL_INCLUDE.is_dir() else []
    proc = run_in_root(version, ["bash", "-c", script], binds=[tmp_path], ro_binds=ro, timeout=600)
    log = proc.stdout + proc.stderr
    results = dict(re.findall(r"^@@ (\w+) rc=(\d+)$", log, re.M))
    assert set(results) == set(units), log[-4000:]
    for name in ("kernels", "checksum", "collectives"):
        assert results[name] == "0", f"HIP {version}: {name} does not compile warning-free:\n{log[-6000:]}"
    assert results["naive"] != "0" and NAIVE_ERROR[version] in log, log[-4000:]
    assert results["discarded"] != "0" and "declared with 'nodiscard' attribute" in log, log[-4000:]
