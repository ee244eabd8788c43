"""Golden expectations of whole ``python -m tools hipify`` runs: the cases, and the command that writes them.

    python tests/hipify/frozen.py --check [CASE...]   # compare (what tests/hipify/test_frozen.py does)
    python tests/hipify/frozen.py --write [CASE...]   # write tests/hipify/frozen/CASE.txt again: review the diff
    python tests/hipify/frozen.py --list

Each case builds a small tree in a fresh directory (TMP) and runs one or more command lines over it, with changes
between them (an edited source, an edited output, a record pointing elsewhere, ...). What each run leaves is
written down: the exit status, stderr (paths as TMP), stdout's digest, and every file, directory and link under TMP
that is not one of the case's inputs as it was made, with the digest of its bytes (bench/hipify_digest.py: the
state file and reports without their timings, the tool's code fingerprint as TOOL). The corpora: the golden files,
tests/hipify/data, csrc/, a generated tree (bench/hipify_corpus.py), a seeded token soup with the lane-mask edge
cases (widths, shifts by the width or more, nesting past the bound), a hand-made odd tree (every resolution path,
naming rule and odd file the tree pass has a branch for) and bad command lines and outputs.

The expectations were first written from the outputs of commit 0d050ad. They change only when the behaviour
does: then write them again and review every changed line. ``--write`` is a command for a person; it refuses to
run under pytest.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXPECTED = HERE / "frozen"
sys.path.insert(0, str(REPO / "bench"))
from hipify_corpus import make_corpus  # noqa: E402
from hipify_digest import digest, normalized, placed, run_hipify, tree  # noqa: E402

WRITE_COMMAND = "python tests/hipify/frozen.py --write"
STATE_FILE = ".hipify-state.json"


@dataclass(frozen=True)
class Step:
    """One command line (``{tmp}`` is the case's directory), after ``before`` changed the tree."""

    argv: tuple[str, ...]
    before: Callable[[Path], None] | None = None
    env: tuple[tuple[str, str | None], ...] = ()
    cwd: bool = False  # run in TMP (relative paths)


@dataclass(frozen=True)
class Case:
    name: str
    about: str
    make: Callable[[Path], None]
    steps: tuple[Step, ...] = field(default_factory=tuple)


def _write(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


# -- the corpora ----------------------------------------------------------------------------------------------

#: the byte-soup tokens: the tokenizer's edges, directives, names of each mapping class, the target rules'
#: triggers, the lint's patterns (the engine comparisons drew from the same list)
SOUP_TOKENS = [
    *(b"//", b"/*", b"*/", b"/*/", b'"', b"'", b"\\", b"\\\r\n", b"\\\n", b"\r\n", b"\n", b'R"', b'R"x(', b')x"'),
    *(b'u8"', b"L'", b'LR"(', b")", b"1'000", b"0x1CU"),
    *(b"#include <cuda_runtime.h>", b'# include_next "a.h"', b'#include "cuda_fp16.h"', b"#includex"),
    *(b"#include <cuda/pipeline>", b"#define cudaFooBar 1"),
    *(b"<<<", b"<<", b">>>", b"::", b"cub::", b"namespace cub", b"cub", b".", b"->"),
    *(b"cudaMalloc", b"cudaMemcpyAsync", b"__shfl_down_sync", b"__shfl_sync", b"cudaStream_t", b"CUresult"),
    *(b"cuGetErrorString", b"cudaGraphCreate", b"cublasCreate", b"cudaErrorInvalidTexture", b"cudaFooBar", b"void "),
    *(b"x", b"_", b"9", b"R", b"cu", b"\xe9", b"\xff", b" ", b"\t", b"(", b",", b";"),
    *(b"0xffffffff", b"0xffffffffu", b"32", b"32u", b"32ul", b"& 31", b"& 0x1f", b"% 32", b">> 5", b"threadIdx.x"),
    *(b"lane", b"for (int o = 16; o > 0; o /= 2)", b"asm volatile(", b"__asm__(", b"__ballot_sync(", b"unsigned m = "),
    *(b"__popc(", b"__CUDA_ARCH__ >= 7", b"texture<", b"tex1Dfetch<float>(", b"this_grid().sync(", b"memcpy_async"),
    *(b"hipify: ignore", b"hipify: ignore(lane-math)", b"__global__ void k() {"),
    *(b"cudaFree(p);", b"cudaDeviceSynchronize()", b"(void)", b"if (x) ", b"else ", b"case 1: ", b"#endif\n"),
    *(b"#define FULL 0xffffffff\n", b"const unsigned kFull = 0xffffffffu;", b"unsigned m = __activemask();"),
    *(b"__activemask()", b"~0u", b"-1", b"0x0000ffff", b"__syncwarp(", b"__match_any_sync(", b"/* c */", b"\x00"),
    *(
        b"#include <cuda_bf16.h>",
        b"#include <cuda_fp4.h>",
        b"#include <cublas_v2.h>",
        b"#include <cuda_profiler_api.h>",
    ),
    *(b"#include <nvtx3/nvToolsExt.h>", b"#include <crt/x.h>", b"k", b"k<T>", b"ns::k", b"<<<g, b>>>(x)"),
    *(b"<<<1, 2, 0, s>>>();", b"__shfl_xor_sync(", b"__any_sync(", b"__syncwarp()", b"cuFooBar", b"CU_FOO"),
    *(b"nvrtcFoo", b"cudaThreadSynchronize", b"cudaLaunchCooperativeKernelMultiDevice", b"__nv_bfloat16"),
    *(b"cuCtxCreate(&c, 0, d);", b"cudaMallocAsync", b"fftw_plan", b"fftw_execute_dft", b"FFTW_FORWARD", b"_CubLog"),
    *(b"#include <cub/cub.cuh>", b"#include <cuda.h>", b"int ", b"struct ", b"return ", b"=", b"{", b"}", b"?", b":"),
    *(b"cudaMemset(p, 0, n) /* c */;", b"for (;;) ", b"do ", b"FULL_MASK", b"kHalfWarp", b"kWide", b"mask"),
]

#: lane masks at the edges of the evaluator: widths, suffixes, digit separators, shifts by the width or more,
#: casts, names, malformed expressions
SPECIAL_MASKS = [
    *(b"0xffffffff", b"0x'ff'ff'ff'ff", b"0x'", b"0b'", b"0b1111'1111", b"0xffffffffULLu", b"4294967295"),
    *(b"2147483648", b"9223372036854775807", b"9223372036854775808", b"18446744073709551615"),
    *(b"18446744073709551616", b"99999999999999999999999999999", b"0x1ffffffffffffffff", b"1 << 31", b"1u << 31"),
    *(b"1 << 32", b"1ull << 63", b"1ull << 64", b"1ull << 200", b"1ull << (0ull - 1)", b"~0u >> 70", b"-1 >> 1"),
    *(b"(int)-1", b"(long)-1", b"(long)(unsigned)-1", b"(unsigned long long)(int)-1"),
    *(b"static_cast< std::uint32_t >(~0)", b"static_cast<unsigned long long>(-1)", b"(std::size_t)-1"),
    *(b"(abstd::x)-1", b"(unsigned)", b"unsigned(-1)", b"uint64_t(0xffffffff) | 0", b"((void)m, __activemask())"),
    *(b"(void)0, 0xffffffff", b"(unsigned)__activemask()", b"(uint32_t)__ballot_sync(FULL, p)"),
    *(b"__ballot_sync(0xffffffff, p)", b"(unsigned)__ballot(1)", b"f(x)", b"::FULL", b":: \n FULL", b"(unsigned)FULL"),
    *(b"0xffffffff & ~(1u << 3)", b"1 2", b"((((((1))))))", b"(1", b"1)", b"~~~~~~~~0", b"- - -1", b"0xffff'ffff'"),
    *(b"0x", b"0b2", b"1e5", b"'a'", b"\xe9t\xe9", b"a\xe9", b"FULL_MASK", b"kHalfWarp", b"kWide", b"HALF", b"BAD"),
    b"(" * 63 + b"0xffffffff" + b")" * 63,  # the nesting bound: 64 levels are evaluated,
    b"(" * 64 + b"0xffffffff" + b")" * 64,
    b"(" * 130 + b"0xffffffff" + b")" * 130,  # deeper is not a constant (and never a RecursionError)
]


def make_soup(root: Path, files: int = 160, seed: int = 1) -> None:
    """``files`` seeded token soups, a kernel per special mask, and the project header the soups' names come from."""
    rng = random.Random(seed)
    suffixes = [".cu", ".cuh", ".h", ".cpp", ".c", ".hpp", ".inl"]
    for i in range(files):
        soup = b"".join(rng.choice(SOUP_TOKENS) for _ in range(rng.randint(0, 60)))
        _write(root, {f"s{i // 40}/soup{i}{suffixes[i % len(suffixes)]}": soup})
    header = (
        "#pragma once\n#define FULL_MASK 0xffffffff\nconst unsigned kHalfWarp = 0x0000ffff;\n"
        "constexpr uint64_t kWide = ~0ull;\n"
    )
    _write(root, {"s0/masks.cuh": header})
    for crlf in (False, True):
        body = [
            b'#include "masks.cuh"',
            b"#define FULL 0xffffffff",
            b"#define HALF (FULL >> 16)",
            b"#define BAD \\",
            b"  1",
        ]
        body.append(b"__global__ void k(float* d, unsigned param, bool p) {")
        body.append(b"  float v = d[threadIdx.x];")
        for n, mask in enumerate(SPECIAL_MASKS):
            body.append(b"  v += __shfl_down_sync(" + mask + b", v, 1);  // " + str(n).encode())
            body.append(b"  d[" + str(n).encode() + b"] = __ballot_sync(" + mask + b", p);")
        body.append(b"}")
        eol = b"\r\n" if crlf else b"\n"
        _write(root, {f"masks/special{'_crlf' if crlf else ''}.cu": eol.join(body) + eol})


def make_corpus_tree(tmp: Path) -> None:
    """The golden files, tests/hipify/data, csrc/, a generated tree and the soup: one tree."""
    src = tmp / "src"
    shutil.copytree(HERE / "golden", src / "golden")
    shutil.copytree(HERE / "data", src / "data")
    shutil.copytree(REPO / "csrc", src / "csrc")
    make_corpus(src / "gen", 300_000)
    make_soup(src / "soup")
    _write(tmp, {"rocm/include/hip/hip_version.h": "#define HIP_VERSION_MAJOR 7\n#define HIP_VERSION_MINOR 2\n"})


# Hand-made: every resolution path, naming rule and odd file the tree pass has a branch for.
ODD: dict[str, bytes | str] = {
    "main.cu": '#include "common/util.h"\n#include <helper_cuda.h>\n#include "cuda/kern.cuh"\n'
    "__global__ void k() {}\nint main() { cudaDeviceSynchronize(); k<<<1, 1>>>(); }\n",
    "common/util.h": "#pragma once\n#include <cuda_runtime.h>\ninline void u() { cudaFree(0); }\n",
    "common/plain.h": "#pragma once\nint plain();\n",
    "Common/helper_cuda.h": "#pragma once\n#include <cuda.h>\n#define checkCudaErrors(x) x\n",
    "cuda/kern.cuh": '#include "../common/plain.h"\n__device__ int kern() { return __shfl_sync(FULL_MASK, 1, 0); }\n',
    "cuda/masks.h": "#pragma once\n#define FULL_MASK 0xffffffff\n",
    "cuda/cuda_utils.h": '#include "kern.cuh"\nvoid f() { cudaStream_t s; }\n',
    "sub/deep/x.cpp": '#include "common/plain.h"\n#include "util.h"\nint x() { return plain(); }\n',
    "sub/deep/api.cpp": "void g() { cudaMalloc(0, 4); }\n",
    "sub/deep/sync.cu": "__device__ void s(unsigned m) { __syncwarp(m); __activemask(); }\n",
    "sub/unistd.h": "#pragma once\n",
    "sub/uses_unistd.c": "#include <unistd.h>\nint main() { return 0; }\n",
    "a.cu": "__global__ void a() {}\n",
    "a.hip": "// hip already\n",
    "nul.cu": b"\x00\x01binary cudaMalloc\n",
    "latin1.cpp": "// caf\xe9 cudaMalloc\nvoid l() { cudaMalloc(0, 1); }\n".encode("latin-1"),
    "bom.cu": b"\xef\xbb\xbf#include <cuda_runtime.h>\nvoid b() { cudaFree(0); }\n",
    "crlf.cu": b"#include <stdio.h>\r\n__global__ void c() {}\r\n",
    ".hidden_file.cu": "void h() { cudaFree(0); }\n",
    ".git/config": "[core]\n",
    "__pycache__/x.cu": "void p() {}\n",
    ".hidden/y.cu": "void y() {}\n",
    "notes.txt": "cudaMalloc in prose\n",
    "CMakeLists.txt": "add_library(x main.cu)\n",
    "noext": "cudaFree\n",
    "dots..cu": "void d() { cudaFree(0); }\n",
    "lint.cu": "__global__ void w(int* o) { int lane = threadIdx.x & 31; o[lane] = 32; }  // hipify: ignore(lane-math)\n",
    "unmapped.cu": "#define cudaMyMacro 1\nvoid m() { int x = cudaMyMacro + cudaNotARealName; }\n",
    "dír/é.cu": '#include "é.h"\nvoid e() { cudaFree(0); }\n',
    "dír/é.h": "#pragma once\nvoid f() { cudaStream_t s; }\n",
    "café.h": "#pragma once\ncudaError_t cafe();\n",  # (a UTF-8 name, included by its Latin-1 spelling below)
    "latin1_include.cpp": b'#include "caf\xe9.h"\nint z() { return 0; }\n',
    "sub/missing.cpp": '#include "nowhere.h"\n#include <sys/types.h>\n#include "../broken.h"\nint q;\n',
}


def make_odd(tmp: Path) -> None:
    src = tmp / "src"
    _write(src, ODD)
    (src / "broken.cu").symlink_to(src / "nowhere.cu")  # unreadable: a finding, no output
    (src / "broken.h").symlink_to(src / "nowhere.h")  # (an include of it resolves no further)
    (src / "linked_dir").symlink_to(src / "common")  # not walked (followlinks=False)
    (src / "linked.h").symlink_to(src / "common" / "plain.h")


def make_odd_and_golden(tmp: Path) -> None:
    make_odd(tmp)
    shutil.copytree(HERE / "golden", tmp / "golden")


def make_masks(eol: str) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        common = "#pragma once\n#define FULL_MASK 0xffffffff\n#define HALF 0x0000ffff\n"
        kernel = (
            '#include "common.cuh"\n__global__ void k(int* d) {\n  d[0] = __shfl_sync(FULL_MASK, d[0], 0) + '
            "__shfl_sync(HALF, d[0], 0) + __shfl_sync(NOWHERE, d[0], 0);\n}\n"
        )
        _write(tmp / "src", {"common.cuh": common.replace("\n", eol), "k.cu": kernel.replace("\n", eol)})

    return make


# -- changes between steps --------------------------------------------------------------------------------------


def _edit_inputs(tmp: Path) -> None:
    src = tmp / "src"
    (src / "sub" / "deep" / "api.cpp").write_text("void g() { cudaMalloc(0, 8); cudaFree(0); }\n")  # changed
    (src / "new.cu").write_text('#include "common/util.h"\nvoid n() {}\n')  # added
    shutil.rmtree(src / "cuda")  # removed: stale outputs and their emptied directories go


def _edit_output(tmp: Path) -> None:
    (tmp / "out" / "common" / "plain.h").write_text("edited output\n")


def _touch_output(tmp: Path) -> None:
    os.utime(tmp / "out" / "main.hip", ns=(0, 0))


def _old_output(tmp: Path) -> None:
    _write(tmp / "out", {"main.hip": "old\n", "keep/me.txt": "mine\n", STATE_FILE: "not json"})


def _narrow_mask(tmp: Path) -> None:
    (tmp / "src" / "common.cuh").write_text("#pragma once\n#define FULL_MASK 0x0000ffff\n#define HALF 0x0000ffff\n")


def _bad_places(tmp: Path) -> None:
    _write(tmp / "out2", {"plain.h": "#pragma once\nint plain();\n", "z.cu": "void z() { cudaFree(0); }\n"})
    (tmp / "a-file").write_text("not a directory\n")
    (tmp / "empty").mkdir()
    _write(tmp, {"bad.tsv": "cuda_name\thip_name\n"})


def _overrides(tmp: Path) -> None:
    (tmp / "local.tsv").write_text(
        "# project overrides\ncuda_name\thip_name\tkind\tlibrary\n"
        "cudaMalloc\thipMallocManagedX\tfunction\truntime\ncudaMyMacro\thipMyMacro\tfunction\tproject\n",
        encoding="utf-8",
    )


def _record_elsewhere(tmp: Path) -> None:
    src = tmp / "src"
    state_path = tmp / "out" / STATE_FILE
    state = json.loads(state_path.read_text())
    outside = tmp / "elsewhere.txt"
    outside.write_text("not ours\n")
    notes = state["files"][str(src / "notes.txt")]
    state["files"][str(src / "gone.cpp")] = {**notes, "out": str(outside)}
    state["files"][str(src / "gone2.cpp")] = {**notes, "out": str(src / "main.cu")}
    state["files"][str(src / "gone3.cpp")] = [1, 2]  # (not an entry: ignored, but it is a key)
    state_path.write_text(json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n")


def _empty_dir(tmp: Path) -> None:
    (tmp / "empty").mkdir()


def _non_utf8_name(tmp: Path) -> None:
    src = tmp / "src"
    _write(
        src, {"ok.cu": "void f() { cudaFree(0); }\n", "inc.cu": '#include "\xffx.h"\nvoid g() {}\n'.encode("latin-1")}
    )
    for name, body in ((b"\xffx.cu", b"void g() { cudaMalloc(0, 1); }\n"), (b"\xffx.h", b"cudaStream_t s;\n")):
        with open(os.path.join(os.fsencode(src), name), "wb") as fh:
            fh.write(body)


# -- the cases ------------------------------------------------------------------------------------------------

_REPORT = ("--report", "{tmp}/report.json")
_OUT_REPORT = ("-o", "{tmp}/out", *_REPORT, "--hip-version", "6.4")
_CORPUS_OPTIONS = {
    "5.0": ("--hip-version", "5.0"),
    "5.2": ("--hip-version", "5.2"),
    "6.4-keep": ("--hip-version", "6.4", "--naming", "keep"),
    "7.2-literals-launch": (
        "--hip-version",
        "7.2",
        "--translate-comments",
        "--launch",
        "hipLaunchKernelGGL",
        "-j",
        "1",
    ),
    "6.2-nolint-strict": ("--hip-version", "6.2.1", "--no-lint", "--no-unmapped", "--max-listed", "3", "--strict"),
    "6.4-jobs2": ("--hip-version", "6.4", "-j", "2"),
}


def _hipify(*args: str) -> tuple[str, ...]:
    return ("{tmp}/src", "-o", "{tmp}/out", *args)


CASES: list[Case] = [
    *(
        Case(
            f"corpus-{name}",
            "the golden files, tests/hipify/data, csrc/, a generated tree and the token soup, as one tree",
            make_corpus_tree,
            (Step(_hipify(*_REPORT, *options)),),
        )
        for name, options in _CORPUS_OPTIONS.items()
    ),
    Case(
        "corpus-detected-7.2",
        "the target detected from ROCM_HOME (HIP 7.2)",
        make_corpus_tree,
        (Step(_hipify(*_REPORT), env=(("ROCM_HOME", "{tmp}/rocm"), ("ROCM_PATH", None))),),
    ),
    *(
        Case(
            f"odd-{hip}-{naming}",
            "the odd tree",
            make_odd,
            (Step(_hipify(*_REPORT, "--hip-version", hip, "--naming", naming, "--max-listed", "100")),),
        )
        for hip in ("5.2", "6.4")
        for naming in ("hipify_torch", "keep")
    ),
    Case(
        "file-arguments",
        "file arguments and two roots",
        make_odd_and_golden,
        (Step(("{tmp}/src/main.cu", "{tmp}/src/sub", "{tmp}/golden", "{tmp}/src/cuda/kern.cuh", *_OUT_REPORT, "-q")),),
    ),
    Case(
        "reruns",
        "fresh; nothing new; inputs changed, added and removed; other options; an output edited, then touched",
        make_odd,
        (
            Step(_hipify(*_REPORT, "--hip-version", "6.4")),
            Step(_hipify(*_REPORT, "--hip-version", "6.4")),
            Step(_hipify(*_REPORT, "--hip-version", "6.4"), before=_edit_inputs),
            Step(_hipify(*_REPORT, "--hip-version", "6.4", "--no-lint")),
            Step(_hipify(*_REPORT, "--hip-version", "6.4", "--no-lint"), before=_edit_output),
            Step(_hipify(*_REPORT, "--hip-version", "6.4", "--no-lint"), before=_touch_output),
        ),
    ),
    Case(
        "existing-output-without-record",
        "an output directory with files of its own and a state file that is not JSON",
        make_odd,
        (Step(_hipify(*_REPORT, "--hip-version", "5.2"), before=_old_output),),
    ),
    *(
        Case(
            f"project-masks-{name}",
            f"lane masks defined in a project header ({name} line ends), then the header narrows one",
            make_masks(eol),
            (
                Step(_hipify(*_REPORT, "--hip-version", "6.4")),
                Step(_hipify(*_REPORT, "--hip-version", "6.4")),
                Step(_hipify(*_REPORT, "--hip-version", "6.4"), before=_narrow_mask),
                Step(_hipify(*_REPORT, "--hip-version", "5.2")),
            ),
        )
        for name, eol in (("lf", "\n"), ("crlf", "\r\n"))
    ),
    Case(
        "report-stdout-quiet",
        "the report on stdout with -q; no findings listed with --strict",
        make_odd,
        (
            Step(_hipify("--hip-version", "5.2", "--report=-", "-q")),
            Step(_hipify(*_REPORT, "--hip-version", "5.2", "--max-listed", "0", "--strict")),
        ),
    ),
    Case(
        "bad-inputs",
        "bad command lines, inputs and outputs: one clear error each, nothing written",
        make_odd,
        (
            Step(("{tmp}/nope", "-o", "{tmp}/out", "--hip-version", "5.2"), before=_bad_places),
            Step(("{tmp}/src/sub", "-o", "{tmp}/src", "--hip-version", "5.2")),  # in place
            Step(_hipify("--hip-version", "5.2", "-j", "0")),
            Step(("{tmp}/out2/z.cu", "{tmp}/out2/plain.h", "-o", "{tmp}/out2", "--hip-version", "5.2")),
            Step(_hipify("--hip-version", "5.2", "--report", "{tmp}/src/notes.txt/r.json")),
            Step(("{tmp}/src", "-o", "{tmp}/a-file/out", "--hip-version", "6.4", "-q")),  # an unwritable output
            Step(("{tmp}/src", "-o", "{tmp}/a-file", "--hip-version", "6.4", "-q")),
            Step(_hipify("--hip-version", "5.2", "--naming", "flat")),
            Step(_hipify("--hip-version", "5.2", "--launch", "hip")),
            Step(_hipify("--hip-version", "5.2", "--engine", "other")),
            Step(_hipify("--hip-version", "five")),
            Step(_hipify("--hip-version", "5.2", "{tmp}/src/a.cu")),  # a second run of sources
            Step(_hipify("--hip-version", "5.2", "--mappings", "{tmp}/missing.tsv")),
            Step(_hipify("--hip-version", "5.2", "--mappings", "{tmp}/bad.tsv")),
            Step(("{tmp}/src", "--hip-version", "5.2")),  # no -o
            Step(("{tmp}/empty", "-o", "{tmp}/out-empty", "--hip-version", "5.2")),  # an empty tree
            Step(_hipify("--hip-version", "5.2", "--no-lin", "-j2")),  # what argparse takes: an abbreviation, -j2
        ),
    ),
    Case(
        "overrides",
        "a project override file",
        make_odd,
        (Step(_hipify(*_REPORT, "--hip-version", "6.4", "--mappings", "{tmp}/local.tsv"), before=_overrides),),
    ),
    Case(
        "relative-paths",
        "relative sources, output and report",
        make_odd,
        (
            Step(
                ("./src/../src/sub", "src//main.cu", "--hip-version", "5.2", "--report=rep/x/r.json", "-o", "out"),
                cwd=True,
            ),
        ),
    ),
    Case(
        "output-inside-source",
        "an output directory inside the source directory (skipped by the walk), twice; an empty tree",
        make_odd,
        (
            Step(("{tmp}/src", "-o", "{tmp}/src/hip-out", *_REPORT, "--hip-version", "5.2")),
            Step(("{tmp}/src", "-o", "{tmp}/src/hip-out", *_REPORT, "--hip-version", "5.2")),
            Step(("{tmp}/empty", "-o", "{tmp}/out-empty", *_REPORT, "--hip-version", "5.2"), before=_empty_dir),
        ),
    ),
    Case(
        "record-pointing-elsewhere",
        "a record whose stale outputs lie outside the output directory or are sources",
        make_odd,
        (
            Step(_hipify(*_REPORT, "--hip-version", "5.2")),
            Step(_hipify(*_REPORT, "--hip-version", "5.2"), before=_record_elsewhere),
        ),
    ),
    Case(
        "non-utf8-names",
        "file names that are not UTF-8",
        _non_utf8_name,
        (Step(_hipify(*_REPORT, "--hip-version", "6.4")), Step(_hipify(*_REPORT, "--hip-version", "6.4"))),
    ),
]
BY_NAME = {c.name: c for c in CASES}


# -- running and writing down ----------------------------------------------------------------------------------


def run_case(case: Case, tmp: Path, *, subprocess_run: bool = False) -> list[str]:
    """The case's lines (what its expectation file holds), run in the empty directory ``tmp``."""
    tmp = Path(os.path.abspath(tmp))
    case.make(tmp)
    places = {str(tmp): "TMP"}
    inputs = tree(tmp, places)
    lines = [f"case {case.name}: {case.about}"]
    for n, step in enumerate(case.steps, 1):
        if step.before is not None:
            step.before(tmp)
        argv = [a.format(tmp=tmp) for a in step.argv]
        env = {k: (v.format(tmp=tmp) if v is not None else None) for k, v in step.env}
        rc, out, err = run_hipify(argv, env=env, cwd=tmp if step.cwd else None, subprocess_run=subprocess_run)
        shown = " ".join(a.replace(str(tmp), "TMP") for a in step.argv).replace("{tmp}", "TMP")
        lines.append(f"step {n}: hipify {shown}" + "".join(f" [{k}={v}]" for k, v in step.env))
        lines.append(f"  exit {rc}")
        if out:  # (the report, with --report=-)
            shown_out = normalized("stdout.json", out.encode("utf-8", "surrogateescape"), places)
            lines.append(f"  stdout {digest(shown_out)} ({out.count(chr(10))} lines)")
        lines += [f"  | {line}" for line in placed(err, places).splitlines()]
        now = tree(tmp, places)
        for rel in sorted(now.keys() | inputs.keys()):
            if now.get(rel) != inputs.get(rel):
                lines.append(f"  {rel}: {now.get(rel, 'gone')}")
    return lines


def expectation_path(name: str) -> Path:
    return EXPECTED / f"{name}.txt"


def expected_lines(name: str) -> list[str] | None:
    path = expectation_path(name)
    if not path.is_file():
        return None
    return [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]


def _header(case: Case) -> list[str]:
    return [
        f"# tests/hipify/frozen/{case.name}.txt: a golden expectation of tests/hipify/frozen.py, checked by",
        f"# tests/hipify/test_frozen.py. Written by `{WRITE_COMMAND} {case.name}`; review every change.",
    ]


def difference(name: str, got: Sequence[str]) -> str | None:
    """None when ``got`` is the expectation, else the unified diff and what to do."""
    want = expected_lines(name)
    if want is None:
        return f"no expectation {expectation_path(name).relative_to(REPO)}: write it with `{WRITE_COMMAND} {name}`"
    if list(got) == want:
        return None
    diff = "\n".join(difflib.unified_diff(want, list(got), "expected", "this run", n=1, lineterm=""))
    return (
        f"{name}: the run differs from {expectation_path(name).relative_to(REPO)}:\n{diff}\n"
        f"If the change is intended, write it with `{WRITE_COMMAND} {name}` and review the diff."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", action="store_true", help="compare every (or each named) case")
    what.add_argument("--write", action="store_true", help="write the expectations again (review the diff)")
    what.add_argument("--list", action="store_true", help="list the cases")
    ap.add_argument("cases", nargs="*", metavar="CASE")
    ap.add_argument("--subprocess", action="store_true", help="run each command line in a fresh interpreter")
    args = ap.parse_args(argv)
    if args.list:
        for c in CASES:
            print(f"{c.name}: {c.about} ({len(c.steps)} steps)")
        return 0
    if args.write and os.environ.get("PYTEST_CURRENT_TEST"):
        print("frozen.py --write refuses to run under pytest: expectations are written by a person", file=sys.stderr)
        return 2
    unknown = [n for n in args.cases if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown case {', '.join(unknown)} (--list)")
    failed = 0
    for case in [BY_NAME[n] for n in args.cases] if args.cases else CASES:
        with tempfile.TemporaryDirectory(prefix=f"frozen-{case.name}-") as tmp:
            got = run_case(case, Path(tmp), subprocess_run=args.subprocess)
        if args.write:
            EXPECTED.mkdir(exist_ok=True)
            changed = expected_lines(case.name) != got
            expectation_path(case.name).write_text("\n".join([*_header(case), *got]) + "\n", encoding="utf-8")
            print(f"{case.name}: {'written' if changed else 'unchanged'} ({len(got)} lines)")
            continue
        problem = difference(case.name, got)
        print(f"{case.name}: {'ok' if problem is None else 'DIFFERENT'}")
        if problem is not None:
            failed += 1
            print(problem)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
