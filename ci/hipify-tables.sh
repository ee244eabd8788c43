#!/usr/bin/env bash
# HIPIFY's mapping tables for tools/hipify, read from the hipify-clang binary of a ROCm root, for a release
# whose source tarball cannot be fetched (Debian's hipify 7.2.4 source package is listed by experimental's
# Sources index, but the archive reachable here answers 404 for its files; the binary package is installed).
#
#   ci/hipify-tables.sh ROOT OUT
#       ROOT: a root made by `ci/rocm-root.sh make 7.2 ROOT --with-hipify-clang` (or any root with hipify-clang)
#       OUT:  a new directory laid out like a HIPIFY 7.x checkout:
#               OUT/docs/reference/tables/*_supported_by_HIP.md   (hipify-clang --md --doc-format=full)
#               OUT/bin/hipify-perl                               (hipify-clang --perl: include map and kinds)
#               OUT/python/cuda_to_hip_mappings.py                (hipify-clang --python: kinds of all names)
#               OUT/ORIGIN                                        (the package and version they came from)
#       then: python -m tools update-mappings OUT --source-version X.Y.Z --origin "$(cat OUT/ORIGIN)"
#
# These are the commands HIPIFY's own documentation tables and hipify-perl are generated with, so the files
# have the format of the repository's; only data is read from them (MIT licence, ROCm/HIPIFY).
set -euo pipefail

die() { printf '[hipify-tables] error: %s\n' "$*" >&2; exit 1; }
[[ $# -eq 2 ]] || die "usage: ci/hipify-tables.sh ROOT OUT"
root=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
[[ -f "$root/.monarch-root" ]] || die "$root is not a root made by ci/rocm-root.sh (no .monarch-root stamp)."
[[ -x "$root/usr/bin/hipify-clang" ]] || die "$root has no hipify-clang; make it with: ci/rocm-root.sh make 7.2 $root --with-hipify-clang"
[[ ! -e "$out" ]] || die "$out exists; give a new directory."
mkdir -p "$out/docs/reference/tables" "$out/bin" "$out/python"
out=$(cd "$out" && pwd)
bash "$here/rocm-root.sh" run "$root" --bind "$out" -- bash -c '
  set -e
  out=$0
  hipify-clang --md --doc-format=full --o-dir="$out/docs/reference/tables" >/dev/null
  hipify-clang --perl --o-hipify-perl-dir="$out/bin" >/dev/null
  hipify-clang --python --o-python-map-dir="$out/python" >/dev/null
  printf "Debian hipify-clang %s (hipify-clang --md --doc-format=full; --perl; --python)\n" \
    "$(dpkg-query -W -f="\${Version}" hipify-clang)" >"$out/ORIGIN"
' "$out"
ls "$out/docs/reference/tables"/*_supported_by_HIP.md >/dev/null 2>&1 || die "hipify-clang wrote no tables into $out"
printf '[hipify-tables] %s: %s\n' "$out" "$(cat "$out/ORIGIN")" >&2
