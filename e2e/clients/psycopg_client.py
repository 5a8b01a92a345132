"""One run of the compatibility matrix with psycopg2 or psycopg 3.

Driven by e2e/clients_test.go: python3 psycopg_client.py psycopg2|psycopg.
Connection settings come from DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER,
DPPROXY_PASSWORD and DPPROXY_DB. It prints one JSON object with what it
saw; the Go test judges it. A step that fails unexpectedly raises, so the
exit code is non-zero and the traceback is on stderr.

psycopg2 fills parameters in on the client and sends simple queries;
psycopg 3 binds them server side with the extended protocol, and
prepare=True makes it a named prepared statement. Both open a transaction
implicitly (autocommit off, their default), so BEGIN/ROLLBACK pass through
the proxy too.
"""

import json
import os
import sys

DP_SQL = (
    "SELECT region, count(*) AS n, avg(amount) AS mean FROM orders "
    "WHERE amount > %s GROUP BY region ORDER BY region"
)


def main():
    driver = sys.argv[1]
    # The same connection settings for both drivers (libpq keywords).
    connect_args = dict(
        host=os.environ["DPPROXY_HOST"],
        port=os.environ["DPPROXY_PORT"],
        user=os.environ["DPPROXY_USER"],
        password=os.environ["DPPROXY_PASSWORD"],
        dbname=os.environ["DPPROXY_DB"],
        sslmode="disable",
        application_name="matrix-" + driver,
    )
    if driver == "psycopg2":
        import psycopg2 as db

        version = db.__version__
        conn = db.connect(**connect_args)

        def sqlstate(e):
            return e.pgcode

        def run(cur, sql, params=None, prepare=False):
            cur.execute(sql, params)

    elif driver == "psycopg":
        import psycopg as db

        version = db.__version__
        conn = db.connect(**connect_args)

        def sqlstate(e):
            return e.sqlstate

        def run(cur, sql, params=None, prepare=False):
            cur.execute(sql, params, prepare=prepare or None)

    else:
        raise SystemExit("usage: psycopg_client.py psycopg2|psycopg")

    out = {"driver": driver, "version": version}
    cur = conn.cursor()

    # Connect-time questions tools ask.
    run(cur, "SELECT version(), current_database(), current_schema()")
    out["server_version"], out["database"], out["schema"] = cur.fetchone()

    # Browse the schema the way these drivers' users (and Superset's
    # SQLAlchemy inspector) do: information_schema with a parameter.
    run(
        cur,
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
        ("public",),
    )
    out["tables"] = [r[0] for r in cur.fetchall()]
    run(
        cur,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
        ("public", "orders"),
    )
    out["columns"] = {name: typ for name, typ in cur.fetchall()}

    # A DP aggregate with a bound parameter, through a prepared statement
    # where the driver has one.
    out["dp"] = dp_query(cur, run, 10)

    # A refusal, and the connection is usable afterwards (after the
    # rollback the aborted transaction needs).
    try:
        run(cur, "SELECT * FROM orders")
        cur.fetchall()
        out["refusal"] = "none"
    except db.Error as e:
        out["refusal"] = sqlstate(e)
        out["refusal_message"] = str(e).splitlines()[0]
    conn.rollback()
    out["dp_after"] = dp_query(cur, run, 400)
    run(cur, "SELECT count(*) FROM products WHERE price > %s", (0,))
    out["public_count"] = cur.fetchone()[0]
    conn.commit()
    conn.close()
    print(json.dumps(out, default=str))


def dp_query(cur, run, threshold):
    run(cur, DP_SQL, (threshold,), prepare=True)
    rows = cur.fetchall()
    return {
        # type_code is the column's type OID in both drivers.
        "type_oids": [d[1] for d in cur.description],
        "names": [d[0] for d in cur.description],
        "python_types": [type(v).__name__ for v in rows[0]] if rows else [],
        "rows": [[r[0], r[1], float(r[2])] for r in rows],
    }


if __name__ == "__main__":
    main()
