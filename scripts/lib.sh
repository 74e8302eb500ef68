# Shared by the scripts: install what ebb's commands need on a fresh Debian machine.

EBB_ON_EXIT=()

# Runs command "$1" when the calling script exits, after those registered before it.
on_exit() {
  EBB_ON_EXIT+=("$1")
  trap 'for f in "${EBB_ON_EXIT[@]}"; do "$f"; done' EXIT
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

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
  port=$(free_port)
  # Registered before the cluster exists, so that a Ctrl-C while it starts leaves nothing behind.
  EBB_PG_STOP=("${as[@]}" "$bin/pg_ctl" -D "$EBB_PG_DIR/data" -m immediate stop)
  on_exit stop_postgres
  "${as[@]}" "$bin/initdb" -D "$EBB_PG_DIR/data" -U postgres -A trust --no-sync >/dev/null
  "${as[@]}" "$bin/pg_ctl" -D "$EBB_PG_DIR/data" -l "$EBB_PG_DIR/log" -w start \
    -o "-h 127.0.0.1 -p $port -k $EBB_PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" >/dev/null
  export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
  echo "started a throwaway Postgres at $DATABASE_URL" >&2
}

# Headless Chromium for the web console's browser test (tests/external/console_browser.rs): Debian's
# chromium package, installed when missing.
need_chromium() {
  if command -v chromium >/dev/null 2>&1; then
    return
  fi
  echo "installing Chromium (apt-get)..." >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
}

# Prometheus and promtool for the Prometheus metric source's tests (tests/external/prometheus.rs, which
# starts its own server on a free port with history written by promtool): Debian's prometheus
# package, installed when missing.
need_prometheus() {
  if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    return
  fi
  echo "installing Prometheus (apt-get)..." >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
}

# PgBouncer, for the test of leadership behind a pooler (tests/external/pooler.rs, which starts
# its own in front of the tests' Postgres): Debian's pgbouncer package, installed when missing.
need_pgbouncer() {
  if command -v pgbouncer >/dev/null 2>&1; then
    return
  fi
  echo "installing PgBouncer (apt-get)..." >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null
}

stop_postgres() {
  "${EBB_PG_STOP[@]}" >/dev/null 2>&1 || true
  rm -rf "$EBB_PG_DIR"
}

# moto's EC2 emulator on 127.0.0.1 for the AWS provider's tests: installs moto with pip if it is
# missing, points the AWS SDK at it with dummy credentials (never real ones), and stops it when
# the calling script exits. scripts/moto_server.py adds what EC2 does and moto lacks.
need_moto() {
  if ! python3 -c 'import moto.server, flask' >/dev/null 2>&1; then
    echo "installing moto (pip)..." >&2
    python3 -m pip install --quiet --disable-pip-version-check 'moto[server]' >&2
  fi
  local port
  port=$(free_port)
  EBB_MOTO_LOG=$(mktemp /tmp/ebb-moto.XXXXXX)
  python3 "$(dirname "${BASH_SOURCE[0]}")/moto_server.py" -H 127.0.0.1 -p "$port" >"$EBB_MOTO_LOG" 2>&1 &
  EBB_MOTO_PID=$!
  on_exit stop_moto
  local tries=0
  until curl -fs -o /dev/null "http://127.0.0.1:$port/moto-api/" 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ] || ! kill -0 "$EBB_MOTO_PID" 2>/dev/null; then
      echo "moto did not start; its log:" >&2
      cat "$EBB_MOTO_LOG" >&2
      exit 1
    fi
    sleep 0.1
  done
  unset AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_PROFILE
  export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
  export AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
  echo "started moto's EC2 emulator at $AWS_ENDPOINT_URL" >&2
}

# parliament, the IAM policy linter that tests/external/iam.rs runs (with its community auditors) on the
# policies in deploy/: installed with pip like moto, at the version whose findings the test's
# allow-list was made against (another version may report more, or name them otherwise).
need_parliament() {
  local version=1.6.4
  if [ "$(python3 -c 'import parliament; print(parliament.__version__)' 2>/dev/null)" != "$version" ]; then
    echo "installing parliament $version (pip)..." >&2
    python3 -m pip install --quiet --disable-pip-version-check "parliament==$version" >&2
  fi
}

# The clouds' official Python SDKs (Alibaba's ECS request models and the signer of its OpenAPI
# core; Tencent's common signer and its CVM and Tag request models), which
# tests/external/cloud_sdks.rs holds ebb's requests against: pinned, since the signatures and
# the models are what the test compares with.
need_cloud_sdks() {
  local pins="alibabacloud_ecs20140526==7.11.8 alibabacloud_cms20190101==4.0.10
    alibabacloud_tea_openapi==0.4.6 alibabacloud_credentials==1.0.12
    tencentcloud-sdk-python-common==3.1.195 tencentcloud-sdk-python-cvm==3.1.178
    tencentcloud-sdk-python-tag==3.1.109 tencentcloud-sdk-python-monitor==3.1.189"
  # shellcheck disable=SC2086 # one argument a pin
  if ! python3 - $pins 2>/dev/null <<'PY'; then
import importlib.metadata as m, sys
sys.exit(any(m.version(name) != version for name, version in (p.split("==") for p in sys.argv[1:])))
PY
    echo "installing the clouds' Python SDKs (pip)..." >&2
    # shellcheck disable=SC2086
    python3 -m pip install --quiet --disable-pip-version-check $pins >&2
  fi
}

# Jupyter Server with a Python kernel, for the idle rule's jupyter signal
# (tests/common/jupyter.rs starts one per test): pip, pinned.
need_jupyter() {
  local pins="jupyter_server==2.17.0 jupyter_client==8.10.0 ipykernel==7.4.0"
  # shellcheck disable=SC2086 # one argument a pin
  if ! python3 - $pins 2>/dev/null <<'PY'; then
import importlib.metadata as m, sys
sys.exit(any(m.version(name) != version for name, version in (p.split("==") for p in sys.argv[1:])))
PY
    echo "installing Jupyter Server (pip)..." >&2
    # shellcheck disable=SC2086
    python3 -m pip install --quiet --disable-pip-version-check $pins >&2
  fi
}

stop_moto() {
  kill "$EBB_MOTO_PID" 2>/dev/null || true
  rm -f "$EBB_MOTO_LOG"
}
