"""Issue 14's client matrix for Python clients: asyncpg, SQLAlchemy 1.4 with
pandas, and psqlODBC through unixODBC and pyodbc.

Driven by e2e/clients14_test.go: python3 clients14.py asyncpg|sqlalchemy|odbc.
Connection settings come from DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER,
DPPROXY_PASSWORD and DPPROXY_DB. Every check is one step; a step records
what it got or the error it got (SQLSTATE and message) and the run goes on,
so one failure does not hide the others. It prints one JSON object
{step: result}; the Go test judges it. A step that hangs is cut off after
DPPROXY_STEP_TIMEOUT seconds and recorded as {"timeout": true} (asyncpg);
the test runs the whole program with a timeout too.
"""

import asyncio
import json
import os
import sys
import traceback

DP_SQL = (
    "SELECT region, count(*) AS n, avg(amount) AS mean FROM orders "
    "WHERE amount > {p} GROUP BY region ORDER BY region"
)
STEP_TIMEOUT = float(os.environ.get("DPPROXY_STEP_TIMEOUT", "5"))

env = os.environ
out = {}


def err(e):
    """What a step saw when it failed: the SQLSTATE where the driver has one."""
    code = (
        getattr(e, "sqlstate", None)
        or getattr(e, "pgcode", None)
        or getattr(getattr(e, "orig", None), "pgcode", None)
    )
    if code is None and e.args and isinstance(e.args[0], str) and len(e.args[0]) == 5:
        code = e.args[0]  # pyodbc: args = (SQLSTATE, message)
    msg = str(e).strip().splitlines()
    return {"error": type(e).__name__, "sqlstate": code, "message": msg[0] if msg else ""}


def rows(rs):
    return [[r[0], float(r[1]), float(r[2])] for r in rs]


def step(name, fn):
    try:
        out[name] = fn()
    except Exception as e:  # recorded, judged by the Go test
        out[name] = err(e)
        if env.get("DPPROXY_TRACE"):
            traceback.print_exc()


# --- asyncpg -------------------------------------------------------------
# asyncpg prepares every statement with Parse, Describe, Flush (no Sync),
# binds with binary formats and introspects types it does not know with a
# recursive query over pg_type.


async def asyncpg_main():
    import asyncpg

    out["version"] = asyncpg.__version__
    conn = await asyncio.wait_for(
        asyncpg.connect(
            host=env["DPPROXY_HOST"],
            port=int(env["DPPROXY_PORT"]),
            user=env["DPPROXY_USER"],
            password=env["DPPROXY_PASSWORD"],
            database=env["DPPROXY_DB"],
            ssl=False,
        ),
        STEP_TIMEOUT,
    )

    async def astep(name, coro):
        try:
            out[name] = await asyncio.wait_for(coro, STEP_TIMEOUT)
        except asyncio.TimeoutError:
            out[name] = {"timeout": True}
        except Exception as e:
            out[name] = err(e)

    async def dp(th):
        return {"rows": rows(await conn.fetch(DP_SQL.format(p="$1"), th))}

    async def tables():
        rs = await conn.fetch(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY 1",
            "public",
        )
        return {"tables": [r[0] for r in rs]}

    async def introspect():
        # products' row type is not one of asyncpg's built-in codecs: it
        # runs its type-introspection query, then decodes the composite.
        r = await conn.fetchval("SELECT p FROM products p WHERE product_id = $1", 1)
        return {"value": [str(v) for v in r]}

    async def one(sql):
        return {"value": await conn.fetchval(sql)}

    await astep("catalog", tables())
    await astep("introspection", introspect())
    await astep("dp", dp(10))
    await astep("refusal", one("SELECT * FROM orders"))
    await astep("after_refusal", one("SELECT count(*) FROM products"))
    await astep("syntax", one("SELEC 1"))
    await astep("after_syntax", one("SELECT count(*) FROM products"))
    await astep("param", dp(400))
    try:
        await asyncio.wait_for(conn.close(), 2)
    except Exception:
        conn.terminate()


# --- SQLAlchemy 1.4 + pandas ---------------------------------------------
# inspect(engine) runs Superset's schema discovery; pandas.read_sql runs a
# query with psycopg2 (parameters filled in on the client).


def sqlalchemy_main():
    import pandas
    import sqlalchemy as sa

    out["version"] = sa.__version__ + " pandas " + pandas.__version__
    url = sa.engine.URL.create(
        "postgresql+psycopg2",
        username=env["DPPROXY_USER"],
        password=env["DPPROXY_PASSWORD"],
        host=env["DPPROXY_HOST"],
        port=int(env["DPPROXY_PORT"]),
        database=env["DPPROXY_DB"],
        query={"sslmode": "disable"},
    )
    engine = sa.create_engine(url, pool_size=1, max_overflow=0)

    def catalog():
        insp = sa.inspect(engine)
        return {
            "tables": sorted(insp.get_table_names(schema="public")),
            "columns": {c["name"]: str(c["type"]) for c in insp.get_columns("orders", schema="public")},
            "primary_key": insp.get_pk_constraint("orders", schema="public")["constrained_columns"],
            "foreign_keys": sorted(
                "%s->%s" % (",".join(f["constrained_columns"]), f["referred_table"])
                for f in insp.get_foreign_keys("orders", schema="public")
            ),
        }

    def read_sql(th):
        df = pandas.read_sql(sa.text(DP_SQL.format(p=":th")), engine, params={"th": th})
        return {"names": list(df.columns), "rows": rows(df.itertuples(index=False))}

    def execute(sql):
        with engine.connect() as c:
            return {"value": c.execute(sa.text(sql)).scalar()}

    step("catalog", catalog)
    step("dp", lambda: read_sql(10))
    step("refusal", lambda: execute("SELECT * FROM orders"))
    step("after_refusal", lambda: execute("SELECT count(*) FROM products"))
    step("syntax", lambda: execute("SELEC 1"))
    step("after_syntax", lambda: execute("SELECT count(*) FROM products"))
    step("param", lambda: read_sql(400))
    engine.dispose()


# --- psqlODBC via unixODBC and pyodbc ------------------------------------
# The catalog calls of Tableau, Excel and Power BI: SQLTables and
# SQLColumns; psqlODBC reports the database as the catalog, so Excel's MS
# Query writes tables as catalog.schema.table.

ODBC_DRIVER = "/usr/lib/x86_64-linux-gnu/odbc/psqlodbcw.so"


def odbc_main():
    import pyodbc

    out["version"] = pyodbc.version
    pw = env["DPPROXY_PASSWORD"].replace("}", "}}")
    conn = pyodbc.connect(
        "DRIVER={%s};SERVER=%s;PORT=%s;DATABASE=%s;UID=%s;PWD={%s};SSLMODE=disable"
        % (ODBC_DRIVER, env["DPPROXY_HOST"], env["DPPROXY_PORT"], env["DPPROXY_DB"], env["DPPROXY_USER"], pw),
        autocommit=True,
        timeout=int(STEP_TIMEOUT),
    )
    cur = conn.cursor()
    catalog = {}

    def tables():
        ts = cur.tables(schema="public", tableType="TABLE").fetchall()
        catalog["name"] = ts[0].table_cat if ts else None
        cols = cur.columns(table="orders", schema="public").fetchall()
        return {
            "catalog": catalog["name"],
            "tables": sorted(t.table_name for t in ts),
            "columns": {c.column_name: c.type_name for c in cols},
        }

    def run(sql, *params):
        cur.execute(sql, *params)
        return {"value": cur.fetchone()[0]}

    def dp(th):
        cur.execute(DP_SQL.format(p="?"), th)
        return {"names": [d[0] for d in cur.description], "rows": rows(cur.fetchall())}

    def three_part():
        # As MS Query writes it, with the catalog SQLTables reported.
        cur.execute(
            'SELECT region, count(*) AS n, avg(amount) AS mean FROM "%s"."public"."orders" '
            "WHERE amount > 10 GROUP BY region ORDER BY region" % catalog.get("name")
        )
        return {"rows": rows(cur.fetchall())}

    step("catalog", tables)
    step("dp", lambda: dp(10))
    step("refusal", lambda: run("SELECT * FROM orders"))
    step("after_refusal", lambda: run("SELECT count(*) FROM products"))
    step("syntax", lambda: run("SELEC 1"))
    step("after_syntax", lambda: run("SELECT count(*) FROM products"))
    step("param", lambda: dp(400))
    step("three_part_public", lambda: run('SELECT count(*) FROM "%s".public.products' % catalog.get("name")))
    step("three_part", three_part)
    conn.close()


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    if which == "asyncpg":
        asyncio.run(asyncpg_main())
    elif which == "sqlalchemy":
        sqlalchemy_main()
    elif which == "odbc":
        odbc_main()
    else:
        raise SystemExit("usage: clients14.py asyncpg|sqlalchemy|odbc")
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
