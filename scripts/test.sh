#!/usr/bin/env bash
# The one test command (README, .ci/run): finds or installs what the tests
# need, then runs go vet and every test (unit tests with -race, e2e against a
# throwaway PostgreSQL). Extra arguments go to `go test`. The default run
# must take at most 10 minutes on two busy cores; the fuzz phase (about 5.5
# minutes at 10 s a target, most of it building the instrumented packages)
# runs only when DPPROXY_FUZZTIME is set (.ci/run sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

# PostgreSQL server binaries (initdb, postgres) for the throwaway test
# server, unless the tests are pointed at an existing one.
have_pg() {
  command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}
if [ -z "${DPPROXY_TEST_UPSTREAM:-}" ] && ! have_pg; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing PostgreSQL server binaries (Debian package postgresql)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  else
    echo "test.sh: no PostgreSQL server binaries found; install PostgreSQL (e.g. apt-get install postgresql) or set DPPROXY_TEST_UPSTREAM" >&2
    [ "${CI:-}" = true ] && exit 1
  fi
fi

# The real clients of the compatibility matrix (e2e/clients_test.go):
# installed from Debian and npm when possible; under CI=true a missing
# client stops the run here.
scripts/install-clients.sh

if ! command -v gcc >/dev/null 2>&1; then
  echo "test.sh: gcc is required (pg_query_go uses cgo)" >&2
  exit 1
fi

phase_start=$SECONDS
phase_done() { echo "== $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }

echo "== go vet"
go vet ./...
phase_done "go vet"
echo "== go test -race"
go test -race -count=1 -timeout 20m "$@" ./...
phase_done "go test -race"
# Fuzz runs (issue 4): the rewriter, the wire front end before and after
# startup, DPPROXY_FUZZTIME each (10s in CI; 0 or unset skips them).
# Longer runs: docs/threat-model.md, "Fuzzing".
fuzztime="${DPPROXY_FUZZTIME:-0}"
if [ "$fuzztime" != 0 ]; then
  echo "== go test -fuzz ($fuzztime each)"
  go test -run '^$' -fuzz '^FuzzRewrite$' -fuzztime "$fuzztime" ./rewrite
  go test -run '^$' -fuzz '^FuzzDeepExpressions$' -fuzztime "$fuzztime" ./rewrite
  go test -run '^$' -fuzz '^FuzzStartup$' -fuzztime "$fuzztime" ./proxy
  go test -run '^$' -fuzz '^FuzzParseCache$' -fuzztime "$fuzztime" ./proxy
  go test -run '^$' -fuzz '^FuzzWire$' -fuzztime "$fuzztime" ./e2e
  go test -run '^$' -fuzz '^FuzzDifferential$' -fuzztime "$fuzztime" ./e2e
  phase_done "go test -fuzz"
else
  echo "== fuzzing skipped (DPPROXY_FUZZTIME=10s runs each target for 10 s, about 5.5 minutes more)"
fi
