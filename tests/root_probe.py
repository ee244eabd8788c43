"""Run by tests/build_backend/test_rocm_roots.py with a ROCm root's Python, in a venv holding a monarch-runtime wheel:
uses the runtime as a user on a GPU-less machine would and prints what happened as one JSON object.

``--bundled-hip DIR``: first copy the root's libamdhip64.so.N into DIR and dlopen it there by path, as a
ROCm PyTorch wheel does with the HIP runtime it bundles, so the test can check that importing
monarch_runtime afterwards maps no second HIP runtime (Monarch's ROCm CI died of that: its issue #4145).
``--fake-torch DIR``: make DIR/torch a stand-in for an installed ROCm torch wheel (its __init__ raises: it must
not be imported) carrying a copy of the root's HIP runtime in torch/lib, put DIR on sys.path, import
monarch_runtime, and then load torch's copy as torch would: still one HIP runtime.
Standard library only (it runs inside the roots)."""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
import sys
from pathlib import Path
from typing import Any

SYSTEM_LIBDIR = Path("/usr/lib/x86_64-linux-gnu")


def hip_runtimes_mapped() -> list[str]:
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return sorted({line.split()[-1] for line in maps if "libamdhip64" in line})


def outcome(call: Any) -> dict[str, Any]:
    try:
        value = call()
    except Exception as err:
        return {
            "error": type(err).__name__,
            "bases": [c.__name__ for c in type(err).__mro__],
            "message": str(err),
            "result_name": getattr(err, "result_name", None),
        }
    return {"value": value if isinstance(value, (int, float, str, list, dict)) or value is None else repr(value)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundled-hip", type=Path)
    parser.add_argument("--fake-torch", type=Path)
    args = parser.parse_args()
    result: dict[str, Any] = {}
    torch_copy = None
    if args.fake_torch is not None:
        system = sorted(SYSTEM_LIBDIR.glob("libamdhip64.so.[0-9]"))[-1]
        package = args.fake_torch / "torch"
        (package / "lib").mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("raise RuntimeError('monarch_runtime imported torch')\n")
        torch_copy = package / "lib" / "libamdhip64.so"  # the name ROCm torch wheels give it
        shutil.copy2(system.resolve(), torch_copy)
        sys.path.insert(0, str(args.fake_torch))
    if args.bundled_hip is not None:
        system = sorted(SYSTEM_LIBDIR.glob("libamdhip64.so.[0-9]"))[-1]
        args.bundled_hip.mkdir(parents=True, exist_ok=True)
        copy = args.bundled_hip / system.name
        shutil.copy2(system.resolve(), copy)
        ctypes.CDLL(str(copy))
        result["bundled"] = str(copy)
        result["mapped_before_import"] = hip_runtimes_mapped()

    import monarch_runtime as m  # noqa: PLC0415 - after the bundled runtime, on purpose

    result["build_info"] = m.build_info()
    result["device_count"] = outcome(m.device_count)
    result["devices"] = outcome(m.devices)
    result["checksum_reference"] = m.checksum_reference(b"monarch")
    result["unique_id"] = outcome(lambda: len(m.Communicator.unique_id()))
    result["communicator"] = outcome(lambda: m.Communicator(bytes(128), 1, 0))
    result["device_count_again"] = outcome(m.device_count)  # an error handled once does not stick
    result["mapped_after_import"] = hip_runtimes_mapped()
    if torch_copy is not None:
        result["torch_copy"] = str(torch_copy)
        ctypes.CDLL(str(torch_copy))  # what torch's own libraries do when it is imported later
        result["mapped_after_torch"] = hip_runtimes_mapped()
        result["torch_imported"] = "torch" in sys.modules
    print("PROBE-RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
