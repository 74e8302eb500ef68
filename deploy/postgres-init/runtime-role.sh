#!/bin/sh
# Run by the postgres image on the first start of an empty volume (docker-entrypoint-initdb.d):
# creates the login role ebb serve runs as. `ebb migrate --grant-runtime ebb_runtime` (compose's
# migrate service) then grants it what serve needs.
set -eu
psql -v ON_ERROR_STOP=1 -v password="$EBB_RUNTIME_PASSWORD" \
  --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
CREATE ROLE ebb_runtime LOGIN PASSWORD :'password';
SQL
