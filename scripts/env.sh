# Sourced by the project's scripts: one cache outside the clone, shared by every build and by CI.
export AMBIT_CACHE="${AMBIT_CACHE:-$HOME/.cache/ambit}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$AMBIT_CACHE/target}"
if command -v mold >/dev/null 2>&1; then
  export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C link-arg=-fuse-ld=mold"
fi
