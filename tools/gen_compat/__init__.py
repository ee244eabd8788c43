"""``python -m tools gen-compat``: the CUDA-named alias layer of ``rust/rocm_compat``, generated.

One mapping table for C++ and Rust: the names come from the hipify mapping database
(``tools/hipify/mapping.py``); the C prototypes and the enum values come from a snapshot of the real
CUDA and HIP headers (``data/headers.tsv``, refreshed with ``--refresh-headers``); the names generated
are the ones the workspace uses (a scan of ``rust/``). See docs/rocm_compat.md.
"""
