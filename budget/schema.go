package budget

// The ledger's tables. dpproxy.budgets holds one row per analyst: the
// limits and the running totals every accountant reads (accountant.go);
// dpproxy.charges the append-only audit log; dpproxy.answers the released
// answers (claim.go).

// schemaLockKey is the pg_advisory_xact_lock key that serializes schema
// creation and limit upserts between processes opening one ledger at once
// (CREATE ... IF NOT EXISTS is not safe under concurrency: two creators can
// both pass the existence check and one fails on a unique index).
const schemaLockKey int64 = 0x6470_7072_6f78_7901 // "dpproxy" + 1

// createSchema creates the ledger's schema. Open runs it only when the
// schema is missing: even with IF NOT EXISTS, CREATE SCHEMA needs CREATE on
// the database, which a ledger role given a schema dpproxy of its own
// (docs/operations.md) does not have.
const createSchema = `CREATE SCHEMA IF NOT EXISTS dpproxy`

// schemaDDL creates the ledger's tables in schema dpproxy, or brings an
// older ledger up to date (every statement is idempotent).
func schemaDDL() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS dpproxy.budgets (
			analyst       text PRIMARY KEY,
			epsilon_limit numeric NOT NULL,
			delta_limit   numeric NOT NULL,
			epsilon_spent numeric NOT NULL DEFAULT 0,
			delta_spent   numeric NOT NULL DEFAULT 0,
			updated_at    timestamptz
		)`,
		// rho_spent and delta_approx_spent: zCDP totals. *_granted: what
		// operators added with "dpproxy budget grant"; the limit is the
		// configured budget plus the grants, so a restart keeps grants.
		`ALTER TABLE dpproxy.budgets
			ADD COLUMN IF NOT EXISTS rho_spent          numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS delta_approx_spent numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS epsilon_granted    numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS delta_granted      numeric NOT NULL DEFAULT 0`,
		`CREATE TABLE IF NOT EXISTS dpproxy.charges (
			id          bigserial PRIMARY KEY,
			analyst     text NOT NULL,
			at          timestamptz NOT NULL DEFAULT now(),
			fingerprint text NOT NULL,
			epsilon     numeric NOT NULL,
			delta       numeric NOT NULL
		)`,
		// action: charge (ε, δ spent by a query), grant (added to the
		// limits by an operator), limit (the limits set from the
		// configuration). actor: the analyst, operator or "config".
		`ALTER TABLE dpproxy.charges
			ADD COLUMN IF NOT EXISTS action       text NOT NULL DEFAULT 'charge',
			ADD COLUMN IF NOT EXISTS actor        text NOT NULL DEFAULT '',
			ADD COLUMN IF NOT EXISTS rho          numeric NOT NULL DEFAULT 0,
			ADD COLUMN IF NOT EXISTS delta_approx numeric NOT NULL DEFAULT 0`,
		// epsilon_sq_spent: Σε², the advanced accountant's filter
		// (advanced.go). Added after the others: migrateEpsilonSq fills it
		// for rows that predate it.
		`ALTER TABLE dpproxy.budgets
			ADD COLUMN IF NOT EXISTS epsilon_sq_spent numeric NOT NULL DEFAULT 0`,
		`CREATE INDEX IF NOT EXISTS charges_analyst_at ON dpproxy.charges (analyst, at)`,
		`CREATE OR REPLACE FUNCTION dpproxy.append_only() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN RAISE EXCEPTION 'dpproxy.% is append-only', TG_TABLE_NAME; END$$`,
		`CREATE OR REPLACE TRIGGER charges_append_only BEFORE UPDATE OR DELETE ON dpproxy.charges
			FOR EACH ROW EXECUTE FUNCTION dpproxy.append_only()`,
		`CREATE OR REPLACE TRIGGER charges_no_truncate BEFORE TRUNCATE ON dpproxy.charges
			FOR EACH STATEMENT EXECUTE FUNCTION dpproxy.append_only()`,
		// The released answers: one per question (key is a hash of the
		// analyst, normalized query, parameters, ε, δ and mechanism), each
		// paid for by exactly one charge.
		`CREATE TABLE IF NOT EXISTS dpproxy.answers (
			analyst    text NOT NULL,
			key        text NOT NULL,
			answer     bytea NOT NULL,
			charge_id  bigint NOT NULL UNIQUE REFERENCES dpproxy.charges (id),
			created_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (analyst, key)
		)`,
		// The releases of every charge (release.go), append-only, and the
		// Rényi accountant's sums over them (rdpfold.go): recomputed from
		// the releases whenever stale, so nothing needs migrating here.
		`CREATE TABLE IF NOT EXISTS dpproxy.releases (
			charge_id   bigint NOT NULL REFERENCES dpproxy.charges (id),
			ordinal     int NOT NULL,
			mechanism   text NOT NULL,
			l0          bigint NOT NULL,
			sensitivity float8 NOT NULL,
			scale       float8 NOT NULL,
			epsilon     float8 NOT NULL,
			delta       float8 NOT NULL,
			PRIMARY KEY (charge_id, ordinal)
		)`,
		`CREATE OR REPLACE TRIGGER releases_append_only BEFORE UPDATE OR DELETE ON dpproxy.releases
			FOR EACH ROW EXECUTE FUNCTION dpproxy.append_only()`,
		`CREATE OR REPLACE TRIGGER releases_no_truncate BEFORE TRUNCATE ON dpproxy.releases
			FOR EACH STATEMENT EXECUTE FUNCTION dpproxy.append_only()`,
		`CREATE INDEX IF NOT EXISTS charges_analyst_id ON dpproxy.charges (analyst, id)`,
		`ALTER TABLE dpproxy.budgets
			ADD COLUMN IF NOT EXISTS rdp_spent   float8[],
			ADD COLUMN IF NOT EXISTS rdp_orders  float8[],
			ADD COLUMN IF NOT EXISTS rdp_through bigint`,
	}
}

// hasEpsilonSq is true when dpproxy.budgets has epsilon_sq_spent, asked
// before schemaDDL adds it, so that Open knows to run migrateEpsilonSq.
const hasEpsilonSq = `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.budgets') AND attname = 'epsilon_sq_spent' AND NOT attisdropped)`

// migrateEpsilonSq sets Σε² of every row that predates epsilon_sq_spent
// from the ledger's history: dpproxy.charges records the ε of every charge
// ever admitted (action 'charge'; grants and limit changes are not spend),
// in the exact decimal the ledger added to epsilon_spent, so Σε² here is
// what the running sum would have been had the column always existed (no
// assumption about the mechanisms is needed: the filter uses only each
// charge's ε). It runs once, in the transaction that adds the column, under
// the schema lock; a charge waits for it on the row lock.
const migrateEpsilonSq = `UPDATE dpproxy.budgets b
	SET epsilon_sq_spent = s.sq
	FROM (SELECT analyst, sum(epsilon * epsilon) AS sq FROM dpproxy.charges
	      WHERE action = 'charge' GROUP BY analyst) s
	WHERE s.analyst = b.analyst`

// schemaCurrent is true when the ledger has every table and column the
// newest schemaDDL creates.
const schemaCurrent = `SELECT to_regclass('dpproxy.answers') IS NOT NULL
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.budgets') AND attname = 'delta_granted')
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.charges') AND attname = 'delta_approx')
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.budgets') AND attname = 'epsilon_sq_spent' AND NOT attisdropped)
	AND to_regclass('dpproxy.releases') IS NOT NULL
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.budgets') AND attname = 'rdp_through' AND NOT attisdropped)
	AND ` + tablesCurrent
