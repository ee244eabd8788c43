"""The one table of CUDA headers with no HIP counterpart (tools/hipify/data/cuda_only_headers.tsv, read through
tools/hipify/headers.py by hipify's translation and by tools port's classifier: tests/port/test_classify.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.hipify.headers import cuda_only_header, table, table_row
from tools.hipify.mapping import load_database
from tools.hipify.translate import Translator, positions


def test_rows() -> None:
    rows = table()
    assert len(rows) >= 30
    db = load_database()
    for key, row in rows.items():
        assert row.instead and row.source, key
        mapped = db.header(key)
        assert mapped is None or not (mapped.supported and mapped.hip_name), f"{key}: the database maps it"
    assert table_row("cuda/std/atomic").header == "cuda/std/"  # type: ignore[union-attr]  # the longest prefix
    assert table_row("cuda/pipeline").header == "cuda/pipeline"  # type: ignore[union-attr]
    assert table_row("cuda/experimental/stream.cuh").header == "cuda/"  # type: ignore[union-attr]
    assert table_row("cuda.h") is None and table_row("cooperative_groups.h") is None


@pytest.mark.parametrize(
    ("header", "version", "since"),
    [("cuda_fp6.h", (6, 4), (7, 0)), ("cuda_fp8.h", (5, 2), (6, 2)), ("cuda_bf16.h", (5, 2), (5, 7))],
)
def test_by_target(header: str, version: tuple[int, int], since: tuple[int, int]) -> None:
    row = cuda_only_header(header, version)
    assert row is not None and row.since == since and row.counterpart.startswith("hip/")
    assert cuda_only_header(header, (7, 2)) is None  # HIP 7.2 has every one of them


@pytest.mark.parametrize(
    "include",
    [
        "cooperative_groups/scan.h",
        "cooperative_groups/memcpy_async.h",
        "cuda/barrier",
        "cuda/std/atomic",
        "mma.h",
        "cuda_pipeline.h",
        "nvml.h",
        "nvtx3/nvToolsExt.h",
        "cuda_awbarrier.h",
    ],
)
def test_the_translation_reports_each_where_it_is_included(include: str) -> None:
    tr = Translator(load_database(), (6, 4))
    data = f"#include <cuda_runtime.h>\n  #  include <{include}>\n".encode()
    (finding,) = [f for f in tr.translate(data).findings if f.rule == "cuda-only-header"]
    row = table_row(include)
    assert row is not None and finding.blocking and finding.kind == "hazard" and finding.name == include
    assert positions(data, [finding.offset])[finding.offset] == (2, 15)  # the include path's line:column
    assert row.instead in finding.suggestion and "HIP 6.4" in finding.reason
    assert tr.translate(data).data.endswith(f"<{include}>\n".encode())  # left as it is


def test_a_project_header_of_that_name_is_the_projects(tmp_path: Path) -> None:
    from tools.hipify import HipifyOptions, hipify_tree  # noqa: PLC0415

    (tmp_path / "src" / "cuda").mkdir(parents=True)
    (tmp_path / "src" / "cuda" / "pipeline").write_text("// the project's own\n")
    (tmp_path / "src" / "k.cu").write_text('#include "cuda/pipeline"\n#include <cuda/barrier>\n')
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(6, 4), jobs=1))
    assert [f.name for f in res.findings if f.rule == "cuda-only-header"] == ["cuda/barrier"]


def test_a_directory_row_takes_the_angled_spelling_only() -> None:
    tr = Translator(load_database(), (6, 4))
    data = b'#include "cuda/kern.cuh"\n#include <cuda/kern.cuh>\n#include "mma.h"\n'
    assert [f.name for f in tr.translate(data).findings if f.rule == "cuda-only-header"] == ["cuda/kern.cuh", "mma.h"]
