# shellcheck shell=bash
# Start the test services of the store conformance suite on loopback and export their URLs.
#
#   source .ci/services.sh     # idempotent: reuses servers that are already up
#
# PostgreSQL: Debian's packages, a throwaway cluster run as the postgres user on
# 127.0.0.1:$FLEXAMEM_PG_PORT (trust auth, loopback only). Chroma: `chroma run` on
# 127.0.0.1:$FLEXAMEM_CHROMA_PORT. Exports FLEXAMEM_TEST_POSTGRES_URL and
# FLEXAMEM_TEST_CHROMA_URL. Sourced by .ci/run, so it never calls `exit` or `set -e`.

FLEXAMEM_SERVICES_DIR="${FLEXAMEM_SERVICES_DIR:-/tmp/flexamem-services}"
FLEXAMEM_PG_PORT="${FLEXAMEM_PG_PORT:-54329}"
FLEXAMEM_CHROMA_PORT="${FLEXAMEM_CHROMA_PORT:-58765}"

_flexamem_log() { echo "[services] $*" >&2; }

_flexamem_pg_bin() {
    local initdb
    initdb="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -z "$initdb" ]; then
        _flexamem_log "installing PostgreSQL from Debian's packages"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2 || return 1
        initdb="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)"
    fi
    [ -n "$initdb" ] && dirname "$initdb"
}

_flexamem_start_postgres() {
    local bin data log
    bin="$(_flexamem_pg_bin)" || { _flexamem_log "PostgreSQL not available"; return 1; }
    data="$FLEXAMEM_SERVICES_DIR/pgdata"
    log="$FLEXAMEM_SERVICES_DIR/postgres.log"
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$FLEXAMEM_PG_PORT"; then
        _flexamem_log "PostgreSQL already up on 127.0.0.1:$FLEXAMEM_PG_PORT"
    else
        mkdir -p "$FLEXAMEM_SERVICES_DIR"
        chmod 755 "$FLEXAMEM_SERVICES_DIR"
        if [ ! -f "$data/PG_VERSION" ]; then
            rm -rf "$data"
            install -d -o postgres -g postgres -m 700 "$data"
            runuser -u postgres -- "$bin/initdb" -D "$data" -U postgres --auth=trust \
                --encoding=UTF8 --locale=C.UTF-8 >/dev/null || { _flexamem_log "initdb failed"; return 1; }
        fi
        touch "$log" && chown postgres:postgres "$log"
        runuser -u postgres -- "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 start \
            -o "-h 127.0.0.1 -p $FLEXAMEM_PG_PORT -k /tmp -c max_connections=300 -c fsync=on" >/dev/null \
            || { _flexamem_log "PostgreSQL failed to start; see $log"; tail -n 20 "$log" >&2; return 1; }
        _flexamem_log "PostgreSQL started on 127.0.0.1:$FLEXAMEM_PG_PORT"
    fi
    "$bin/psql" -h 127.0.0.1 -p "$FLEXAMEM_PG_PORT" -U postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'flexamem_test'" | grep -q 1 \
        || "$bin/createdb" -h 127.0.0.1 -p "$FLEXAMEM_PG_PORT" -U postgres flexamem_test \
        || { _flexamem_log "createdb failed"; return 1; }
    export FLEXAMEM_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$FLEXAMEM_PG_PORT/flexamem_test"
}

_flexamem_chroma_up() {
    python - "$FLEXAMEM_CHROMA_PORT" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v2/heartbeat", timeout=2).read()
PY
}

_flexamem_start_chroma() {
    local i
    if _flexamem_chroma_up; then
        _flexamem_log "Chroma already up on 127.0.0.1:$FLEXAMEM_CHROMA_PORT"
    else
        if ! command -v chroma >/dev/null 2>&1; then
            _flexamem_log "installing chromadb"
            python -m pip install -q "chromadb>=1.0" >&2 || { _flexamem_log "chromadb install failed"; return 1; }
        fi
        mkdir -p "$FLEXAMEM_SERVICES_DIR/chroma"
        ANONYMIZED_TELEMETRY=False nohup chroma run --path "$FLEXAMEM_SERVICES_DIR/chroma" \
            --host 127.0.0.1 --port "$FLEXAMEM_CHROMA_PORT" >"$FLEXAMEM_SERVICES_DIR/chroma.log" 2>&1 &
        echo $! >"$FLEXAMEM_SERVICES_DIR/chroma.pid"
        for i in $(seq 1 60); do
            _flexamem_chroma_up && break
            sleep 1
        done
        _flexamem_chroma_up || { _flexamem_log "Chroma failed to start; see $FLEXAMEM_SERVICES_DIR/chroma.log"; return 1; }
        _flexamem_log "Chroma started on 127.0.0.1:$FLEXAMEM_CHROMA_PORT (pid $(cat "$FLEXAMEM_SERVICES_DIR/chroma.pid"))"
    fi
    export FLEXAMEM_TEST_CHROMA_URL="chroma+http://127.0.0.1:$FLEXAMEM_CHROMA_PORT"
}

_flexamem_start_postgres || _flexamem_log "continuing without PostgreSQL (tests fail under CI=true)"
_flexamem_start_chroma || _flexamem_log "continuing without Chroma (tests fail under CI=true)"
