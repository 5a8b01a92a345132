// Issue 14's client matrix for postgres.js and knex (on node-postgres),
// driven by e2e/clients14_test.go: node clients14.js postgres|knex. Both are
// installed into e2e/clients/node_modules by scripts/install-clients.sh.
// Connection settings come from DPPROXY_HOST, DPPROXY_PORT, DPPROXY_USER,
// DPPROXY_PASSWORD and DPPROXY_DB. Every check is one step; a step records
// what it got or its error (SQLSTATE and message) and the run goes on. It
// prints one JSON object {step: result}; the Go test judges it. A step that
// hangs is cut off after DPPROXY_STEP_TIMEOUT seconds ({"timeout": true}).
//
// postgres.js binds every interpolated value as a parameter of a named
// prepared statement (Parse/Describe/Sync, then Bind/Execute); knex builds
// SQL with ? placeholders and binds values, LIKE patterns included
// (whereLike), through node-postgres's unnamed statements.
'use strict';

const env = process.env;
const stepTimeout = 1000 * Number(env.DPPROXY_STEP_TIMEOUT || 5);
const out = {};

function err(e) {
  return { error: e.name || 'Error', sqlstate: e.code || null, message: String(e.message || e).split('\n')[0] };
}

async function step(name, fn) {
  let timer;
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve({ timeout: true }), stepTimeout); });
  try {
    out[name] = await Promise.race([fn(), timeout]);
  } catch (e) {
    out[name] = err(e);
  } finally {
    clearTimeout(timer);
  }
}

const rows = (rs) => rs.map((r) => [r.region, Number(r.n), Number(r.mean)]);

const conn = {
  host: env.DPPROXY_HOST,
  port: Number(env.DPPROXY_PORT),
  user: env.DPPROXY_USER,
  password: env.DPPROXY_PASSWORD,
  database: env.DPPROXY_DB,
};

async function postgresJS() {
  const postgres = require('postgres');
  // postgres.js exports no package.json; read it from node_modules.
  out.version = JSON.parse(require('fs').readFileSync(require('path').join(__dirname, 'node_modules/postgres/package.json'))).version;
  const sql = postgres({ ...conn, ssl: false, max: 1, connect_timeout: 5, onnotice: () => {} });
  const dp = async (th) => ({
    rows: rows(await sql`SELECT region, count(*) AS n, avg(amount) AS mean FROM orders
      WHERE amount > ${th} GROUP BY region ORDER BY region`),
  });
  await step('catalog', async () => {
    const ts = await sql`SELECT table_name FROM information_schema.tables
      WHERE table_schema = ${'public'} AND table_type = 'BASE TABLE' ORDER BY 1`;
    const cs = await sql`SELECT column_name, data_type FROM information_schema.columns
      WHERE table_schema = ${'public'} AND table_name = ${'orders'}`;
    return {
      tables: ts.map((r) => r.table_name),
      columns: Object.fromEntries(cs.map((r) => [r.column_name, r.data_type])),
    };
  });
  await step('dp', () => dp(10));
  await step('refusal', async () => ({ value: (await sql`SELECT * FROM orders`).length }));
  await step('after_refusal', async () => ({ value: Number((await sql`SELECT count(*) AS n FROM products`)[0].n) }));
  await step('syntax', async () => ({ value: (await sql.unsafe('SELEC 1')).length }));
  await step('after_syntax', async () => ({ value: Number((await sql`SELECT count(*) AS n FROM products`)[0].n) }));
  await step('param', () => dp(400));
  await sql.end({ timeout: 2 });
}

async function knexJS() {
  const knex = require('knex')({ client: 'pg', connection: conn, pool: { min: 1, max: 1 } });
  out.version = require('knex/package.json').version;
  const dp = async (th) => ({
    rows: rows(await knex('orders').select('region').count('* as n').avg('amount as mean')
      .where('amount', '>', th).groupBy('region').orderBy('region')),
  });
  await step('catalog', async () => {
    const cs = await knex('information_schema.columns').select('column_name', 'data_type')
      .where({ table_schema: 'public', table_name: 'orders' });
    const ts = await knex('information_schema.tables').select('table_name')
      .where({ table_schema: 'public', table_type: 'BASE TABLE' }).orderBy('table_name');
    return {
      tables: ts.map((r) => r.table_name),
      columns: Object.fromEntries(cs.map((r) => [r.column_name, r.data_type])),
      has_table: await knex.schema.hasTable('orders'),
    };
  });
  await step('dp', () => dp(10));
  await step('refusal', async () => ({ value: (await knex('orders').select('*')).length }));
  await step('after_refusal', async () => ({ value: Number((await knex('products').count('* as n'))[0].n) }));
  await step('syntax', async () => ({ value: (await knex.raw('SELEC 1')).rows.length }));
  await step('after_syntax', async () => ({ value: Number((await knex('products').count('* as n'))[0].n) }));
  await step('param', () => dp(400));
  // knex binds the LIKE pattern as a parameter ($2).
  const like = knex('orders').select('region').count('* as n').avg('amount as mean')
    .where('amount', '>', 10).whereLike('region', 'n%').groupBy('region').orderBy('region');
  out.like_sql = like.toSQL().toNative().sql;
  await step('like', async () => ({ rows: rows(await like) }));
  // The same question with the pattern written into the text.
  await step('like_literal', async () => ({
    rows: rows(await knex('orders').select('region').count('* as n').avg('amount as mean')
      .where('amount', '>', 10).whereRaw("region LIKE 'n%'").groupBy('region').orderBy('region')),
  }));
  await knex.destroy();
}

const which = process.argv[2];
const main = { postgres: postgresJS, knex: knexJS }[which];
if (!main) {
  console.error('usage: node clients14.js postgres|knex');
  process.exit(2);
}
main().then(() => {
  console.log(JSON.stringify(out));
  process.exit(0);
}, (e) => {
  console.error(e);
  process.exit(1);
});
