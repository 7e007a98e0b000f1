#!/usr/bin/env bash
# Installs PostgreSQL from Debian's packages when missing, starts a throwaway cluster on
# loopback (trust auth, no fsync: test data only) and prints its URL on stdout.
set -euo pipefail
# A free loopback port unless one is given: another cluster may hold the usual ones.
PORT="${PHALANX_PG_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
fi
BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
DIR="$(mktemp -d /tmp/phalanx-pg.XXXXXX)"
chown postgres "$DIR"
su postgres -s /bin/sh -c "$BIN/initdb -D $DIR/data -A trust -U postgres" >/dev/null
su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DIR/data -l $DIR/log -w start \
  -o '-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300'" >/dev/null
echo "postgresql+psycopg://postgres@127.0.0.1:$PORT/postgres"
