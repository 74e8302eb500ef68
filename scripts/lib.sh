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

# A throwaway Postgres on 127.0.0.1 when DATABASE_URL is unset: exports DATABASE_URL and
# removes the cluster when the calling script exits. Installs Postgres if it is missing.
need_postgres() {
  if [ -n "${DATABASE_URL:-}" ]; then
    return
  fi
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "installing PostgreSQL (apt-get)..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  # initdb refuses to run as root: run the cluster as the postgres user then.
  local as=()
  if [ "$(id -u)" = 0 ]; then
    as=(runuser -u postgres --)
  fi
  EBB_PG_DIR=$(mktemp -d /tmp/ebb-pg.XXXXXX)
  [ "$(id -u)" = 0 ] && chown postgres: "$EBB_PG_DIR"
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${as[@]}" "$bin/initdb" -D "$EBB_PG_DIR/data" -U postgres -A trust --no-sync >/dev/null
  "${as[@]}" "$bin/pg_ctl" -D "$EBB_PG_DIR/data" -l "$EBB_PG_DIR/log" -w start \
    -o "-h 127.0.0.1 -p $port -k $EBB_PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" >/dev/null
  EBB_PG_STOP=("${as[@]}" "$bin/pg_ctl" -D "$EBB_PG_DIR/data" -m immediate stop)
  trap 'stop_postgres' EXIT
  export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
  echo "started a throwaway Postgres at $DATABASE_URL" >&2
}

stop_postgres() {
  "${EBB_PG_STOP[@]}" >/dev/null 2>&1 || true
  rm -rf "$EBB_PG_DIR"
}
