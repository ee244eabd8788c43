from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tools.errors import ToolError
from tools.hipify.mapping import (
    EXTRA_DB,
    GENERATED_DB,
    KINDS,
    MappingDatabase,
    load_database,
    read_tsv,
    write_tsv,
)
from tools.hipify.translate import Translator
from tools.hipify.update_mappings import main as update_main

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "data" / "hipify_fixture"


def test_database_metadata_names_source_and_version(db: MappingDatabase) -> None:
    assert db.meta["generated"] == "true"
    assert db.source == "https://github.com/ROCm/HIPIFY"
    # HIPIFY 7.2.4, read from Debian's hipify-clang (ci/hipify-tables.sh): a release, not a commit
    assert re.fullmatch(r"\d+\.\d+\.\d+", db.source_version) and db.source_version >= "7.2"
    assert db.meta["source_origin"] or re.fullmatch(r"[0-9a-f]{40}", db.source_commit)
    first = GENERATED_DB.read_text(encoding="utf-8").splitlines()[0]
    assert "GENERATED" in first
    assert len(db) > 8000


@pytest.mark.parametrize(
    ("cuda", "hip", "kind", "library"),
    [
        ("cudaMalloc", "hipMalloc", "function", "runtime"),
        ("cudaStream_t", "hipStream_t", "type", "runtime"),
        ("cudaMemcpyDeviceToHost", "hipMemcpyDeviceToHost", "enum", "runtime"),
        ("cuGetErrorString", "hipDrvGetErrorString", "function", "driver"),
        ("cublasCreate", "hipblasCreate", "function", "blas"),
        ("curandCreateGenerator", "hiprandCreateGenerator", "function", "rand"),
        ("cuda_runtime.h", "hip/hip_runtime.h", "header", "runtime"),
        ("nccl.h", "rccl/rccl.h", "header", "nccl"),
        ("cub", "hipcub", "namespace", "cub"),
        ("__CUDACC__", "__HIPCC__", "define", "driver"),
    ],
)
def test_lookup(db: MappingDatabase, cuda: str, hip: str, kind: str, library: str) -> None:
    e = db.lookup(cuda)
    assert e is not None
    assert (e.hip_name, e.kind, e.library, e.supported) == (hip, kind, library, True)


def test_versions_and_unsupported(db: MappingDatabase) -> None:
    e = db.lookup("cuGetErrorString")
    assert e is not None and e.hip_added == (5, 4, 0)
    assert not e.available_in((5, 2)) and e.available_in((5, 4)) and e.available_in(None)
    unsupported = db.lookup("cudaInitDevice")
    assert unsupported is not None and not unsupported.supported and unsupported.hip_name == ""
    assert db.lookup("ncclAllReduce") is None  # RCCL keeps the names: nothing to translate
    assert {e.kind for e in db} <= KINDS


def test_checked_in_db_is_in_canonical_form(tmp_path: Path) -> None:
    meta, entries = read_tsv(GENERATED_DB)
    out = tmp_path / "db.tsv"
    comment = "\n".join(
        line[2:] for line in GENERATED_DB.read_text(encoding="utf-8").splitlines() if line.startswith("# ")
    )
    write_tsv(out, meta, entries, comment)
    assert out.read_bytes() == GENERATED_DB.read_bytes()
    assert int(meta["entries"]) == len(entries)


def test_regenerate_from_fixture(tmp_path: Path) -> None:
    out = tmp_path / "gen.tsv"
    assert update_main([str(FIXTURE), "-o", str(out), "--commit", "f" * 40]) == 0
    meta, entries = read_tsv(out)
    assert meta["source_commit"] == "f" * 40
    by = {e.cuda_name: e for e in entries}
    assert by["cudaMalloc"].hip_name == "hipMalloc" and by["cudaMalloc"].hip_added == (1, 5, 0)
    assert by["cudaDeviceGetDefaultMemPool"].cuda_added == (11, 2)
    assert not by["cudaInitDevice"].supported
    assert by["cudaThreadExit"].cuda_deprecated == (10, 0)
    assert (by["cudaError_t"].kind, by["cudaSuccess"].kind, by["CUDART_VERSION"].kind) == ("type", "enum", "define")
    assert by["cuGetErrorString"].library == "driver"
    assert by["cuda_runtime.h"].kind == "header" and by["device_launch_parameters.h"].hip_name == ""
    assert by["cudaMalloc"].section == "Device Management"
    # --check: up to date, then stale after an edit of the tables
    assert update_main([str(FIXTURE), "-o", str(out), "--commit", "f" * 40, "--check"]) == 0
    copy = tmp_path / "hipify"
    shutil.copytree(FIXTURE, copy)
    table = copy / "docs" / "tables" / "CUDA_Runtime_API_functions_supported_by_HIP.md"
    table.write_text(table.read_text().replace("`hipMalloc`|1.5.0", "`hipMalloc`|1.6.0"))
    assert update_main([str(copy), "-o", str(out), "--commit", "f" * 40, "--check"]) == 1


def test_regenerate_needs_tables(tmp_path: Path) -> None:
    with pytest.raises(ToolError):
        update_main([str(tmp_path), "-o", str(tmp_path / "x.tsv")])


def test_overrides_tsv_and_json(tmp_path: Path) -> None:
    tsv = tmp_path / "local.tsv"
    tsv.write_text(
        "# project overrides\ncuda_name\thip_name\tkind\tlibrary\n"
        "myCudaThing\tmyHipThing\tfunction\tproject\n"
        "cudaMalloc\thipMallocManagedX\tfunction\truntime\n",
        encoding="utf-8",
    )
    db = load_database(tsv)
    assert db.lookup("myCudaThing") is not None
    e = db.lookup("cudaMalloc")
    assert e is not None and e.hip_name == "hipMallocManagedX" and e.source == "local.tsv"
    js = tmp_path / "local.json"
    js.write_text(
        json.dumps(
            {
                "entries": [
                    {
                        "cuda_name": "__shfl_down_sync",
                        "hip_name": "__shfl_down",
                        "kind": "device_function",
                        "supported": True,
                    }
                ]
            }
        )
    )
    e2 = load_database(js).lookup("__shfl_down_sync")
    assert e2 is not None and e2.hip_name == "__shfl_down" and e2.available_in((5, 2))


def test_bad_override_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("cuda_name\thip_name\tkind\nx\ty\tbogus\n", encoding="utf-8")
    with pytest.raises(ToolError, match="unknown kind"):
        load_database(bad)
    with pytest.raises(ToolError, match="not found"):
        load_database(tmp_path / "missing.tsv")


def test_extra_layer_is_small_and_documented() -> None:
    text = EXTRA_DB.read_text(encoding="utf-8")
    assert text.startswith("#") and "nccl.h\trccl/rccl.h" in text


FIXTURE_72 = FIXTURE / "rocm-7.2"


def test_regenerate_from_a_hipify_7_layout(tmp_path: Path) -> None:
    """HIPIFY 7.x: tables under docs/reference/tables with the U column, no src/; the include map and kinds from
    the hipify-perl and Python map hipify-clang generates (ci/hipify-tables.sh); the release from CHANGELOG.md."""
    out = tmp_path / "gen.tsv"
    assert update_main([str(FIXTURE_72), "-o", str(out)]) == 0
    meta, entries = read_tsv(out)
    assert meta["source_version"] == "7.2.0"  # the newest "HIPIFY for ROCm" heading
    assert "bin/hipify-perl" in meta["source_files"] and "docs" not in meta["source_files"]
    by = {e.cuda_name: e for e in entries}
    assert by["cudaMalloc"].hip_name == "hipMalloc"  # the HIP substitution, not the ROC one
    assert "cublas_v2.h" not in by  # only in rocSubstitutions
    assert (by["cuda_bf16.h"].kind, by["cuda_bf16.h"].hip_name) == ("header", "hip/hip_bf16.h")
    assert by["device_launch_parameters.h"].hip_name == "" and by["device_launch_parameters.h"].supported
    assert by["cudaDeviceGetTexture1DLinearMaxWidth"].hip_added == (6, 4, 0)  # the C (changed) column is skipped
    assert by["cudaMemAdvise"].hip_added == (3, 7, 0) and by["cudaMemAdvise"].hip_removed is None  # U is not R
    assert by["cudaStreamCopyAttributes"].hip_experimental == (7, 2, 0)
    assert by["__reduce_add_sync"].hip_added == (7, 0, 0)
    kinds = {name: by[name].kind for name in ("cudaError_t", "cudaSuccess", "__nv_fp4_e2m1", "__shfl_sync")}
    assert kinds == {
        "cudaError_t": "type",
        "cudaSuccess": "enum",
        "__nv_fp4_e2m1": "device_type",
        "__shfl_sync": "device_function",
    }
    # unsupported names have no substitution: their kinds come from the Python map
    assert (by["cudaErrorTensorMemoryLeak"].kind, by["CUDART_VERSION"].kind) == ("enum", "define")
    assert not by["cudaErrorTensorMemoryLeak"].supported
    # --source-version and --origin are recorded as given; --check sees them
    args = [str(FIXTURE_72), "-o", str(out), "--source-version", "7.2.4", "--origin", "Debian hipify-clang 7.2.4"]
    assert update_main(args) == 0
    meta, _ = read_tsv(out)
    assert (meta["source_version"], meta["source_origin"]) == ("7.2.4", "Debian hipify-clang 7.2.4")
    assert update_main([*args, "--check"]) == 0
    assert update_main([str(FIXTURE_72), "-o", str(out), "--check"]) == 1  # another version: stale
    with pytest.raises(ToolError, match="source-version"):
        update_main([str(FIXTURE_72), "-o", str(out), "--source-version", "seven"])


def test_names_hip_gained_since_translate_only_for_targets_that_have_them(tmp_path: Path) -> None:
    """A name HIP added in 6.4-7.2 is a version finding for an older target and is translated for a newer one."""
    out = tmp_path / "gen.tsv"
    assert update_main([str(FIXTURE_72), "-o", str(out)]) == 0
    db = MappingDatabase.from_entries(read_tsv(out)[1])
    src = b"void f(int* w) { cudaDeviceGetTexture1DLinearMaxWidth(w, 0, 0, 0); }\n"
    for target, translated in (((6, 3), False), ((6, 4), True), ((7, 2), True), (None, True)):
        res = Translator(db, target).translate(src)
        assert (b"hipDeviceGetTexture1DLinearMaxWidth" in res.data) == translated, target
        version = [f for f in res.findings if f.kind == "version"]
        assert bool(version) == (not translated), target
        if version:
            assert "needs HIP >= 6.4 (target 6.3)" in version[0].reason
