"""The target HIP version: the switch (--hip-version, the ROCm found), the rules that follow it (data/targets.tsv),
and headers by version."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildcore.toolchain.rocm import fallback_roots, hip_version
from tools.errors import ToolError
from tools.hipify import HipifyOptions, hipify_tree
from tools.hipify.cli import main as hipify_main
from tools.hipify.mapping import MappingDatabase
from tools.hipify.targets import load_target, read_rows
from tools.hipify.translate import Translator
from tools.hipify.tree import detect_hip_version, parse_hip_version

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
Write = Callable[[Path, dict[str, bytes | str]], None]

SOURCE = b"""#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cusparse.h>
#include <cusolverDn.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_fp4.h>
__global__ void k(float* d) { d[threadIdx.x] = __shfl_down_sync(0xffffffff, d[threadIdx.x], 1); }
void f(float* p) { cudaFree(p); }
"""


def translate(db: MappingDatabase, version: tuple[int, int] | None) -> tuple[bytes, set[tuple[str, str]]]:
    res = Translator(db, version).translate(SOURCE)
    return res.data, {(f.kind, f.name) for f in res.findings}


def test_outputs_by_version(db: MappingDatabase) -> None:
    out52, found52 = translate(db, (5, 2))
    out64, found64 = translate(db, (6, 4))
    out72, found72 = translate(db, (7, 2))
    # library headers: in their own directory from the ROCm 5.2 reorganization on
    for out in (out52, out64, out72):
        for header in (b"hipblas/hipblas.h", b"hipsparse/hipsparse.h", b"hipsolver/hipsolver.h"):
            assert b"#include <" + header + b">" in out
        assert b"hipFree(p);" in out and b"(void)" not in out  # discarded calls are left (and reported)
    assert b"<hipblas/hipblas.h>" not in Translator(db, (5, 1)).translate(SOURCE).data  # flat before 5.2
    # type headers only where HIP has them
    assert b"<hip/hip_bf16.h>" in out64 and b"<hip/hip_fp8.h>" in out64 and b"<cuda_fp4.h>" in out64
    assert ("version", "cuda_fp4.h") in found64 and ("version", "cuda_fp4.h") not in found72
    assert b"<hip/hip_fp4.h>" in out72
    assert {("version", "cuda_bf16.h"), ("version", "cuda_fp8.h"), ("version", "cuda_fp4.h")} <= found52
    # warp masks: dropped for 5.2, widened for 6.4 and 7.2
    assert b"__shfl_down(d[threadIdx.x], 1)" in out52
    assert b"__shfl_down_sync(0xffffffffffffffffULL, d[threadIdx.x], 1)" in out64
    assert b"__shfl_down_sync(0xffffffffffffffffULL, d[threadIdx.x], 1)" in out72


def test_header_version_finding_names_the_version(db: MappingDatabase) -> None:
    res = Translator(db, (6, 4)).translate(b"#include <cuda_fp4.h>\n")
    (finding,) = res.findings
    assert finding.kind == "version" and finding.blocking
    assert "HIP 6.4 has no counterpart" in finding.reason and "HIP >= 7.0" in finding.reason
    assert "7.0" in finding.suggestion


def test_target_rules_from_data() -> None:
    t52, t64, t72, newest = (load_target(v) for v in ((5, 2), (6, 4), (7, 2), None))
    assert (t52.mask64, t52.sync_define) == (None, None)
    assert (t64.mask64, t64.sync_define) == ("0xffffffffffffffffULL", "HIP_ENABLE_WARP_SYNC_BUILTINS")
    assert (t72.mask64, t72.sync_define) == ("0xffffffffffffffffULL", None)
    assert (newest.mask64, newest.sync_define) == (t72.mask64, None)  # no version known: the newest HIP
    assert {t.nodiscard for t in (t52, t64, t72, newest)} == {"hipError_t"}
    assert load_target((5, 1)).nodiscard is None  # not checked before HIP 5.2
    assert "hipGetErrorString" in t72.nodiscard_exempt
    assert t64.headers["cuda_fp4.h"] == ("", (7, 0))


def test_every_target_row_names_its_source() -> None:
    rows = read_rows()
    assert rows and all(rule and key for rule, key, *_ in rows)
    text = (REPO / "tools/hipify/data/targets.tsv").read_text(encoding="utf-8")
    body = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")][1:]
    assert all(len(cells) == 6 and cells[5].strip() for cells in body)


def test_bad_target_rows_are_user_errors(tmp_path: Path) -> None:
    bad = tmp_path / "targets.tsv"
    bad.write_text("rule\tkey\thip_from\thip_before\tvalue\tsource\nheader\tx.h\tsix\t\tx\ts\n", encoding="utf-8")
    with pytest.raises(ToolError, match="bad version"):
        load_target((6, 4), bad)
    bad.write_text("rule\tkey\thip_from\thip_before\tvalue\tsource\nnonsense\tx\t\t\t\ts\n", encoding="utf-8")
    with pytest.raises(ToolError, match="rule one of"):
        load_target((6, 4), bad)
    bad.write_text("rule\tkey\n", encoding="utf-8")
    with pytest.raises(ToolError, match="header row"):
        load_target((6, 4), bad)


@pytest.mark.parametrize(("text", "want"), [("6.4", (6, 4)), ("7.2", (7, 2)), ("7.2.4", (7, 2)), (" 5.2 ", (5, 2))])
def test_parse_hip_version(text: str, want: tuple[int, int]) -> None:
    assert parse_hip_version(text) == want


@pytest.mark.parametrize("text", ["7", "latest", "7.x", "", "6.4-rc1"])
def test_bad_hip_version_is_a_usage_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(ToolError, match="bad HIP version"):
        parse_hip_version(text)
    (tmp_path / "k.cu").write_text("int x;\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools",
            "hipify",
            str(tmp_path / "k.cu"),
            "-o",
            str(tmp_path / "o"),
            "--hip-version",
            text,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "bad HIP version" in proc.stderr and "Traceback" not in proc.stderr


# -- the ROCm found --------------------------------------------------------------------------------------------
def _hip_version_h(root: Path, major: int, minor: int) -> None:
    (root / "include" / "hip").mkdir(parents=True)
    (root / "include" / "hip" / "hip_version.h").write_text(
        f"#define HIP_VERSION_MAJOR {major}\n#define HIP_VERSION_MINOR {minor}\n", encoding="utf-8"
    )


def test_rocm_layouts(tmp_path: Path) -> None:
    amd = tmp_path / "amd"  # AMD's packages: .info/version holds the ROCm release
    (amd / ".info").mkdir(parents=True)
    (amd / ".info" / "version").write_text("7.2.0-43\n", encoding="utf-8")
    deb = tmp_path / "deb"  # Debian's: share/hip/version
    (deb / "share" / "hip").mkdir(parents=True)
    (deb / "share" / "hip" / "version").write_text("# x\nHIP_VERSION_MAJOR=6\nHIP_VERSION_MINOR=4\n", encoding="utf-8")
    hdr = tmp_path / "hdr"
    _hip_version_h(hdr, 6, 2)
    assert (hip_version(amd), hip_version(deb), hip_version(hdr)) == ((7, 2), (6, 4), (6, 2))
    assert hip_version(tmp_path / "missing") is None
    # the build's order (buildcore/toolchain/rocm.py): ROCM_HOME, then ROCM_PATH
    assert detect_hip_version({"ROCM_PATH": str(amd), "ROCM_HOME": str(hdr)}) == (6, 2)
    assert detect_hip_version({"ROCM_PATH": str(amd)}) == (7, 2)
    assert detect_hip_version({"ROCM_HOME": str(deb)}) == (6, 4)


def test_versioned_opt_rocm_newest_first(tmp_path: Path) -> None:
    opt = tmp_path / "opt"
    for name, version in (("rocm-6.4.3", (6, 4)), ("rocm-7.2.0", (7, 2)), ("rocm-7.10.1", (7, 10))):
        _hip_version_h(opt / name, *version)
    roots = [str(r) for r in fallback_roots(opt)]
    assert roots[:4] == [f"{opt}/rocm", f"{opt}/rocm-7.10.1", f"{opt}/rocm-7.2.0", f"{opt}/rocm-6.4.3"]
    assert roots[-1] == "/usr"
    assert detect_hip_version({}, str(opt)) == (7, 10)
    _hip_version_h(opt / "rocm", 6, 4)  # /opt/rocm comes before the versioned ones
    assert detect_hip_version({}, str(opt)) == (6, 4)


def test_default_target_is_the_rocm_found(tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "rocm"
    _hip_version_h(root, 6, 4)
    monkeypatch.setenv("ROCM_PATH", str(root))
    write(tmp_path / "src", {"k.cu": "#include <cuda_runtime.h>\n__global__ void k() { __syncwarp(); }\n"})
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(jobs=1))
    assert res.hip_version == (6, 4)
    report = res.to_json()
    assert report["hip_version"] == "6.4" and report["target"]["sync_define"] == "HIP_ENABLE_WARP_SYNC_BUILTINS"
    explicit = hipify_tree([tmp_path / "src"], tmp_path / "out2", HipifyOptions(hip_version=(7, 2), jobs=1))
    assert explicit.hip_version == (7, 2) and b"__syncwarp()" in (tmp_path / "out2" / "k.hip").read_bytes()


def test_version_option_names_the_tables(capsys: pytest.CaptureFixture[str], db: MappingDatabase) -> None:
    assert hipify_main(["--version"]) == 0
    out = capsys.readouterr().out
    assert f"HIPIFY {db.source_version}" in out and "default target" in out


def test_report_target_section_and_schema(tmp_path: Path, write: Write) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    write(tmp_path / "src", {"k.cu": "__global__ void k(float* d) { d[0] = __shfl_sync(0xffffffff, d[0], 0); }\n"})
    report = tmp_path / "r.json"
    args = [str(tmp_path / "src"), "-o", str(tmp_path / "out"), "--hip-version", "6.4", "--report", str(report), "-q"]
    assert hipify_main(args) == 0
    data = json.loads(report.read_text(encoding="utf-8"))
    schema = json.loads((REPO / "tools/hipify/data/report.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, schema)
    assert data["target"]["full_mask"] == "0xffffffffffffffffULL"
    assert data["database"]["source_version"]
    assert data["counts"]["note"] >= 2  # the widened mask, the macro, the runtime include
    assert {f["rule"] for f in data["findings"]} >= {"sync-mask-widened", "warp-sync-define", "runtime-include"}


def test_cuda_version_macros_and_the_callback_convention_are_blocking(tmp_path: Path) -> None:
    """HIP defines no CUDART_VERSION / CUDA_VERSION (an '#if CUDART_VERSION >= N' silently takes the other
    branch under HIP) and has no CUDART_CB: each use is a blocking finding that says so, never silent."""

    src = tmp_path / "src"
    src.mkdir()
    (src / "z.cu").write_text(
        "#if CUDART_VERSION >= 2020\nint a = 1;\n#endif\n#if CUDA_VERSION > 11000\nint b;\n#endif\n"
        "void CUDART_CB cb(cudaStream_t s, cudaError_t e, void* d) {}\n"
    )
    res = hipify_tree([src], tmp_path / "out", HipifyOptions(hip_version=(7, 2)))
    found = {(f.name, f.line): f for f in res.findings if f.blocking}
    assert set(found) == {("CUDART_VERSION", 1), ("CUDA_VERSION", 4), ("CUDART_CB", 7)}, found
    assert "other branch is compiled" in found[("CUDART_VERSION", 1)].reason
    assert "delete it" in found[("CUDART_CB", 7)].reason
