# Shared by the scripts: install what ebb's commands need on a fresh Debian machine.

# Rust with rustfmt and clippy; cargo must already be installed (rustup).
need_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo is not installed: install Rust with rustup (https://rustup.rs), then run this again" >&2
    exit 1
  fi
  for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
      rustup component add "$component"
    fi
  done
}
