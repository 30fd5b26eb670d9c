#!/usr/bin/env bash
# Provides a Swift toolchain on Linux hosts that have none (Debian 12 ships no Swift).
# Builds, once, a minimal Debian trixie root with Debian's `swiftlang` package, cached outside the
# repository. Idempotent: a finished root is marked and reused.
#
#   scripts/swift-toolchain.sh ensure        # create the cached root if missing
#   scripts/swift-toolchain.sh run DIR CMD…  # run CMD inside the root, with DIR bind-mounted at its own path
set -euo pipefail

cache="${AMBIT_CACHE:-$HOME/.cache/ambit}"
root="$cache/swift-root"
mirror="${AMBIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What the root holds beside its base system; the ready mark records it. git: SwiftPM clones a package
# taken by URL with it (test-swift.sh's package by URL), and Debian's swiftlang does not always pull it in.
packages="swiftlang libc6-dev ca-certificates git"

# Installs $packages inside the root (what it has already is kept).
install_packages() {
  inroot / sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >/dev/null && apt-get clean" \
    >"$cache/swiftlang.log" 2>&1 || { tail -30 "$cache/swiftlang.log" >&2; exit 1; }
  printf '%s' "$packages" >"$root/.ambit-ready"
}

ensure() {
  if [ -f "$root/.ambit-ready" ]; then
    [ "$(cat "$root/.ambit-ready")" = "$packages" ] && return 0
    # A root made with fewer packages (an older mark): add what it lacks rather than start again.
    echo "swift-toolchain: adding to the root: $packages" >&2
    install_packages
    return 0
  fi
  if ! command -v debootstrap >/dev/null; then
    echo "swift-toolchain: installing debootstrap" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  rm -rf "$root"
  mkdir -p "$cache"
  echo "swift-toolchain: debootstrap trixie into $root (one time, a few minutes)" >&2
  debootstrap --variant=minbase trixie "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -30 "$cache/debootstrap.log" >&2; exit 1; }
  echo "swift-toolchain: installing $packages inside the root" >&2
  install_packages
}

# inroot DIR CMD…: run CMD in the root under a private mount namespace, /proc mounted (swiftc needs it to
# find libswiftCore.so), DIR bind-mounted at the same absolute path (SwiftPM records absolute paths).
inroot() {
  local dir="$1"; shift
  unshare --mount --fork -- sh -c '
    set -e
    root="$1"; dir="$2"; shift 2
    mount -t proc proc "$root/proc"
    mount --bind /dev "$root/dev"
    cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
    if [ "$dir" != / ]; then mkdir -p "$root$dir"; mount --bind "$dir" "$root$dir"; fi
    cd "$root$dir" 2>/dev/null || true
    # SWIFT_BACKTRACE=enable=no: a crashing test process exits (and the run fails) instead of waiting
    # forever on the Swift backtracer, which cannot start inside this root (seen once: a hang).
    exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
      SWIFT_BACKTRACE=enable=no sh -c "cd \"\$0\" && exec \"\$@\"" "$dir" "$@"
  ' inroot "$root" "$dir" "$@"
}

case "${1:-ensure}" in
  ensure) ensure ;;
  run) shift; ensure; inroot "$@" ;;
  *) echo "usage: $0 ensure | run DIR CMD…" >&2; exit 2 ;;
esac
