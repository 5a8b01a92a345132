#!/usr/bin/env bash
# Installs the real PostgreSQL clients of the compatibility matrix
# (e2e/clients_test.go, README "Clients"): psql, psycopg2 and psycopg 3
# under Debian's own python3, pgJDBC with Java 17, node-postgres with node;
# and issue 14's clients (e2e/clients14_test.go): asyncpg, SQLAlchemy 1.4
# with pandas, psqlODBC with unixODBC and pyodbc, postgres.js and knex,
# pgcli driven under tmux.
#
# Debian packages are installed with apt-get when run as root; node-postgres,
# postgres.js and knex go into e2e/clients/node_modules (never committed;
# .gitignore) with `npm ci` from e2e/clients/package-lock.json. Without root or apt-get it
# only reports what is missing. Under CI=true a client that is still missing
# afterwards is a failure (exit 1); elsewhere the e2e tests skip it.
set -uo pipefail
cd "$(dirname "$0")/.."

ci=false
[ "${CI:-}" = true ] && ci=true
missing=()

# debian_python is Debian's own interpreter: Debian's python3-psycopg*
# packages load only under it, and another python3 may come first on PATH.
debian_python=/usr/bin/python3

have_psql()      { command -v psql >/dev/null 2>&1; }
have_psycopg2()  { [ -x "$debian_python" ] && "$debian_python" -c 'import psycopg2' >/dev/null 2>&1; }
have_psycopg3()  { [ -x "$debian_python" ] && "$debian_python" -c 'import psycopg' >/dev/null 2>&1; }
have_jdbc()      { [ -f /usr/share/java/postgresql.jar ]; }
# Single-file source launch (java Prog.java) needs the compiler: a JDK.
have_java()      { command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; }
have_node()      { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }
have_pg_module() { [ -f e2e/clients/node_modules/pg/package.json ] &&
                   [ -f e2e/clients/node_modules/postgres/package.json ] &&
                   [ -f e2e/clients/node_modules/knex/package.json ]; }
have_asyncpg()   { [ -x "$debian_python" ] && "$debian_python" -c 'import asyncpg' >/dev/null 2>&1; }
have_sqlalchemy() { [ -x "$debian_python" ] && "$debian_python" -c 'import sqlalchemy, pandas, psycopg2' >/dev/null 2>&1; }
# psqlODBC's Unicode driver, loaded by unixODBC through pyodbc.
have_odbc()      { [ -f /usr/lib/x86_64-linux-gnu/odbc/psqlodbcw.so ] &&
                   [ -x "$debian_python" ] && "$debian_python" -c 'import pyodbc' >/dev/null 2>&1; }
have_pgcli()     { command -v pgcli >/dev/null 2>&1 && command -v tmux >/dev/null 2>&1; }

declare -A pkg=(
  [psql]=postgresql-client
  [psycopg2]="python3 python3-psycopg2"
  [psycopg3]="python3 python3-psycopg"
  [jdbc]=libpostgresql-jdbc-java
  [java]=openjdk-17-jdk-headless
  [node]="nodejs npm"
  [asyncpg]="python3 python3-asyncpg"
  [sqlalchemy]="python3 python3-sqlalchemy python3-pandas python3-psycopg2"
  [odbc]="python3 odbc-postgresql unixodbc python3-pyodbc"
  [pgcli]="pgcli tmux"
)
check=(psql psycopg2 psycopg3 jdbc java node asyncpg sqlalchemy odbc pgcli)

want=()
for c in "${check[@]}"; do
  "have_$c" || want+=(${pkg[$c]})
done
if [ ${#want[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-clients.sh: apt-get install ${want[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null ||
      echo "install-clients.sh: apt-get install failed" >&2
  else
    echo "install-clients.sh: not root or no apt-get; cannot install ${want[*]}" >&2
  fi
fi
for c in "${check[@]}"; do
  "have_$c" || missing+=("$c (Debian: ${pkg[$c]})")
done

if have_node && ! have_pg_module; then
  echo "install-clients.sh: npm ci (node-postgres, postgres.js, knex) in e2e/clients"
  (cd e2e/clients && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "install-clients.sh: npm ci failed" >&2
fi
have_pg_module || missing+=("node-postgres, postgres.js, knex (npm ci in e2e/clients)")

if [ ${#missing[@]} -gt 0 ]; then
  printf 'install-clients.sh: missing: %s\n' "${missing[@]}" >&2
  if $ci; then
    echo "install-clients.sh: CI=true: every client of the matrix is required" >&2
    exit 1
  fi
  echo "install-clients.sh: the e2e client tests will skip these" >&2
fi
exit 0
