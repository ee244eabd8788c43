"""Run by tests/test_rocm_roots.py with a ROCm root's Python, in a venv holding a monarch-runtime wheel:
uses the runtime as a user on a GPU-less machine would and prints what happened as one JSON object.

``--bundled-hip DIR``: first copy the root's libamdhip64.so.N into DIR and dlopen it there by path, as a
ROCm PyTorch wheel does with the HIP runtime it bundles, so the test can check that importing
monarch_runtime afterwards maps no second HIP runtime (Monarch's ROCm CI died of that: its issue #4145).
Standard library only (it runs inside the roots)."""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
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
    args = parser.parse_args()
    result: dict[str, Any] = {}
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
    print(json.dumps(result))


if __name__ == "__main__":
    main()
