# Sourced by the project's scripts: one cache outside the clone, shared by every build and by CI.
export AMBIT_CACHE="${AMBIT_CACHE:-$HOME/.cache/ambit}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$AMBIT_CACHE/target}"
if command -v mold >/dev/null 2>&1; then
  export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C link-arg=-fuse-ld=mold"
fi
# CI builds a fresh clone in a new directory each time: incremental state keyed by that path is never
# reused, and it piled up to 11 GB in the shared cache. Off there.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
