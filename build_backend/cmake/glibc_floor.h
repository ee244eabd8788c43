/* Included first in every host-side compile of the bridge when the build machine's glibc is 2.38 or newer
 * (buildcore/toolchain/rocm.py decides; a Debian sid root is such a machine). glibc 2.38 redirects
 * strtol, sscanf & co. to new __isoc23_* symbols for C++ (which defines _GNU_SOURCE) so that they accept C23's
 * 0b binary prefix; any use of them would then need glibc 2.38 on the target and lift the wheel's manylinux
 * floor above RHEL 9 (2.34) and Ubuntu 22.04 (2.35). The bridge never parses 0b numbers, so it keeps the
 * older entry points, which every glibc has. Both spellings of the switch are covered (2.38-2.39: C2X,
 * 2.40 and later: C23). */
#include <features.h>
#undef __GLIBC_USE_C2X_STRTOL
#define __GLIBC_USE_C2X_STRTOL 0
#undef __GLIBC_USE_C23_STRTOL
#define __GLIBC_USE_C23_STRTOL 0
