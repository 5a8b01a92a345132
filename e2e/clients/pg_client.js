// One run of the compatibility matrix with node-postgres (npm pg), driven by
// e2e/clients_test.go: node pg_client.js. pg is installed into
// e2e/clients/node_modules by scripts/install-clients.sh. Connection
// settings come from DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER,
// DPPROXY_PASSWORD and DPPROXY_DB. It prints one JSON object with what it
// saw; the Go test judges it. An unexpected failure exits non-zero.
//
// node-postgres sends a query with values through the extended protocol as
// an unnamed statement; a query with a name is prepared once per
// connection as a named statement and reused.
'use strict';

const { Client } = require('pg');

const DP_SQL = 'SELECT region, count(*) AS n, avg(amount) AS mean FROM orders ' +
  'WHERE amount > $1 GROUP BY region ORDER BY region';

async function dpQuery(client, threshold) {
  const res = await client.query({ name: 'matrix-dp', text: DP_SQL, values: [threshold] });
  return {
    type_oids: res.fields.map((f) => f.dataTypeID),
    names: res.fields.map((f) => f.name),
    js_types: res.rows.length ? Object.values(res.rows[0]).map((v) => typeof v) : [],
    rows: res.rows.map((r) => [r.region, Number(r.n), Number(r.mean)]),
  };
}

async function main() {
  const client = new Client({
    host: process.env.DPPROXY_HOST,
    port: Number(process.env.DPPROXY_PORT),
    user: process.env.DPPROXY_USER,
    password: process.env.DPPROXY_PASSWORD,
    database: process.env.DPPROXY_DB,
    ssl: false,
    application_name: 'matrix-node-postgres',
  });
  await client.connect();
  const out = { driver: 'node-postgres', version: require('pg/package.json').version };

  let res = await client.query('SELECT version() AS v, current_database() AS db, current_schema() AS s');
  out.server_version = res.rows[0].v;
  out.database = res.rows[0].db;
  out.schema = res.rows[0].s;

  res = await client.query(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name",
    ['public']);
  out.tables = res.rows.map((r) => r.table_name);
  res = await client.query(
    'SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position',
    ['public', 'orders']);
  out.columns = Object.fromEntries(res.rows.map((r) => [r.column_name, r.data_type]));

  out.dp = await dpQuery(client, 10);

  try {
    await client.query('SELECT * FROM orders');
    out.refusal = 'none';
  } catch (e) {
    if (!e.code) throw e;
    out.refusal = e.code;
    out.refusal_message = e.message;
  }
  out.dp_after = await dpQuery(client, 400);
  res = await client.query('SELECT count(*) AS n FROM products WHERE price > $1', [0]);
  out.public_count = Number(res.rows[0].n);
  await client.end();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
