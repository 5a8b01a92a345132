// Package budget keeps each analyst's privacy budget in a durable ledger in
// PostgreSQL (schema dpproxy) and caches noisy answers so that repeating a
// query neither costs budget nor averages the noise away.
//
// The ledger charges before anything runs: Ledger.Charge commits the spend
// and a record of it in one transaction, and only then may the caller send
// the query upstream. A charge is never refunded (a refund on failure would
// make failures a side channel). Budgets are sequentially composed: ε and δ
// of every charge add up.
//
// Spent and limit columns are numeric, so ten charges of 0.1 add up to
// exactly 1.0. Values go to the database as the shortest decimal that
// round-trips the float64 (0.1 is sent as "0.1"), and come back as the
// float64 nearest to the exact decimal.
//
// Concurrency: the conditional UPDATE of an analyst's row takes the row's
// lock, and PostgreSQL re-evaluates the condition on the latest version of
// the row after waiting for that lock, so concurrent charges from any number
// of connections and proxy processes serialize on the row and can never
// overspend together.
//
// Accounting: every charge adds its (ε, δ) and its zCDP cost (ρ and the δ of
// its approximate part) to the analyst's row. Under basic accounting a
// charge is admitted when Σε and Σδ stay within the limits; under zCDP
// accounting it is admitted when either that holds or the zCDP totals,
// converted to (ε, δ) with the rest of the δ limit, do (both bound the same
// sequence of mechanisms, so either suffices).
//
// Answers: Claim serializes the release of one question across every
// connection and process sharing the ledger (a session-level advisory lock,
// released by PostgreSQL when the holder's connection dies), so a question
// is noised and charged once and its answer is stored in dpproxy.answers
// before any client sees it.
//
// Audit: dpproxy.charges is append-only (a trigger refuses UPDATE, DELETE
// and TRUNCATE): one row per charge, per operator grant and per limit change
// read from the configuration.
package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
)

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
	}
}

// schemaCurrent is true when the ledger has every table and column the
// newest schemaDDL creates.
const schemaCurrent = `SELECT to_regclass('dpproxy.answers') IS NOT NULL
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.budgets') AND attname = 'delta_granted')
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('dpproxy.charges') AND attname = 'delta_approx')`

// txOptions begins every ledger transaction explicitly READ WRITE, since the
// pool's connections may default to read-only transactions
// (default_transaction_read_only=on, as the proxy's query traffic runs), and
// READ COMMITTED, since under a stricter default isolation concurrent charges
// would fail with serialization errors instead of waiting for the row lock.
func txOptions() pgx.TxOptions {
	return pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite}
}

// Options configure a Ledger.
type Options struct {
	// Accounting is conf.AccountingBasic (also when empty) or
	// conf.AccountingZCDP; see the package comment.
	Accounting string
}

// Ledger is the durable budget ledger. It is safe for concurrent use, and
// several processes may share one ledger database.
type Ledger struct {
	pool *pgxpool.Pool // not owned: the caller closes it
	zcdp bool          // zCDP accounting; read-only after Open
}

func newLedger(pool *pgxpool.Pool, opts Options) (*Ledger, error) {
	switch opts.Accounting {
	case "", conf.AccountingBasic:
		return &Ledger{pool: pool}, nil
	case conf.AccountingZCDP:
		return &Ledger{pool: pool, zcdp: true}, nil
	}
	return nil, fmt.Errorf("budget: unknown accounting %q", opts.Accounting)
}

// Open creates the dpproxy schema and its tables if missing (or brings an
// older ledger up to date) and sets each analyst's limits to the configured
// budget plus what operators granted, adding analysts not yet in the ledger
// with nothing spent. It never changes what was spent, so lowering a limit
// below the spend simply exhausts the budget. Each limit change is recorded
// in dpproxy.charges (action "limit", actor "config"). Analysts in the
// ledger but not in users are left alone. The caller keeps ownership of pool.
func Open(ctx context.Context, pool *pgxpool.Pool, users []conf.User, opts Options) (*Ledger, error) {
	l, err := newLedger(pool, opts)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		if u.Name == "" {
			return nil, errors.New("budget: open: analyst with no name")
		}
		if !conf.ValidEpsilon(u.Budget.Epsilon) || !conf.ValidDelta(u.Budget.Delta) {
			return nil, fmt.Errorf("budget: open: analyst %q: invalid budget ε=%v, δ=%v", u.Name, u.Budget.Epsilon, u.Budget.Delta)
		}
	}
	err = pgx.BeginTxFunc(ctx, pool, txOptions(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		// Skip DDL when the schema is current, so that a role without
		// CREATE on the database can use a ledger created by someone else.
		var current, exists bool
		if err := tx.QueryRow(ctx, schemaCurrent).Scan(&current); err != nil {
			return fmt.Errorf("check schema: %w", err)
		}
		if !current {
			if err := tx.QueryRow(ctx, `SELECT to_regnamespace('dpproxy') IS NOT NULL`).Scan(&exists); err != nil {
				return fmt.Errorf("check schema: %w", err)
			}
			if !exists {
				if _, err := tx.Exec(ctx, createSchema); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
			for _, stmt := range schemaDDL() {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
		}
		for _, u := range users {
			var eps, delta string
			err := tx.QueryRow(ctx, `
				INSERT INTO dpproxy.budgets AS b (analyst, epsilon_limit, delta_limit, updated_at)
				VALUES ($1, $2::numeric, $3::numeric, now())
				ON CONFLICT (analyst) DO UPDATE
				SET epsilon_limit = EXCLUDED.epsilon_limit + b.epsilon_granted,
				    delta_limit = EXCLUDED.delta_limit + b.delta_granted,
				    updated_at = now()
				WHERE b.epsilon_limit IS DISTINCT FROM EXCLUDED.epsilon_limit + b.epsilon_granted
				   OR b.delta_limit IS DISTINCT FROM EXCLUDED.delta_limit + b.delta_granted
				RETURNING epsilon_limit::text, delta_limit::text`,
				u.Name, decimal(u.Budget.Epsilon), decimal(u.Budget.Delta)).Scan(&eps, &delta)
			if errors.Is(err, pgx.ErrNoRows) {
				continue // unchanged
			}
			if err != nil {
				return fmt.Errorf("set limits of %q: %w", u.Name, err)
			}
			if _, err := tx.Exec(ctx, `
				INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, action, actor)
				VALUES ($1, '', $2::numeric, $3::numeric, 'limit', 'config')`, u.Name, eps, delta); err != nil {
				return fmt.Errorf("audit limits of %q: %w", u.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("budget: open: %w", err)
	}
	return l, nil
}

// Attach uses an existing ledger without changing any limit (for operator
// tools). It fails when the ledger has not been created by Open (a proxy
// that started once) or is older than this version.
func Attach(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Ledger, error) {
	l, err := newLedger(pool, opts)
	if err != nil {
		return nil, err
	}
	var current bool
	if err := pool.QueryRow(ctx, schemaCurrent).Scan(&current); err != nil {
		return nil, fmt.Errorf("budget: attach: %w", err)
	}
	if !current {
		return nil, errors.New("budget: attach: no current ledger in schema dpproxy: start dpproxy serve once to create or update it")
	}
	return l, nil
}

// Charge is one query's cost to one analyst.
type Charge struct {
	Analyst string
	Epsilon float64
	Delta   float64
	// Rho and DeltaApprox are the charge's cost under zCDP accounting:
	// the query is DeltaApprox-approximately Rho-zCDP. When Rho is 0 the
	// charge is taken as (ε, δ)-DP, which costs ρ = ε²/2 and δ (PureRho).
	// They are recorded under either accounting, so that a ledger can be
	// switched to zCDP later.
	Rho         float64
	DeltaApprox float64
	// Fingerprint identifies the query in the ledger's record (a
	// pg_query fingerprint; never raw SQL, which may hold values).
	Fingerprint string
}

// Spend is an analyst's budget at one moment.
type Spend struct {
	EpsilonSpent, EpsilonLimit float64
	DeltaSpent, DeltaLimit     float64
	// Accounting is the accounting the four figures are in: basic
	// (Σε, Σδ), or zcdp when the ledger uses zCDP accounting and the
	// conversion gives the smaller ε. Under zcdp, EpsilonSpent is
	// ρ + 2√(ρ·ln(1/δ')) with δ' = DeltaLimit − DeltaApprox, DeltaSpent is
	// DeltaApprox, and the remaining δ is the δ' the conversion uses.
	Accounting string
	// Rho and DeltaApprox are the zCDP totals, kept under either accounting.
	Rho, DeltaApprox float64

	// Remaining amounts computed exactly in numeric by the ledger; used
	// when exact is set, so that 1.0 - 0.7 reads 0.3.
	epsRemaining, deltaRemaining float64
	exact                        bool
}

// EpsilonRemaining is the ε still available, never negative (a limit
// lowered below the spend leaves 0).
func (s Spend) EpsilonRemaining() float64 {
	if s.exact {
		return s.epsRemaining
	}
	return math.Max(0, s.EpsilonLimit-s.EpsilonSpent)
}

// DeltaRemaining is the δ still available, never negative.
func (s Spend) DeltaRemaining() float64 {
	if s.exact {
		return s.deltaRemaining
	}
	return math.Max(0, s.DeltaLimit-s.DeltaSpent)
}

// inZCDP switches the figures to zCDP when that accounting gives the
// smaller ε, or when basic composition no longer fits the limits.
func (s *Spend) inZCDP() {
	ez := ZCDPEpsilon(s.Rho, s.DeltaLimit-s.DeltaApprox)
	if math.IsInf(ez, 0) {
		return
	}
	basicFits := s.EpsilonSpent <= s.EpsilonLimit && s.DeltaSpent <= s.DeltaLimit
	if basicFits && s.EpsilonSpent <= ez {
		return
	}
	s.Accounting = conf.AccountingZCDP
	s.EpsilonSpent, s.DeltaSpent = ez, s.DeltaApprox
	s.exact = false
}

// spendColumns reads a budgets row into a Spend (see scanSpend).
const spendColumns = `epsilon_spent::float8, epsilon_limit::float8,
	delta_spent::float8, delta_limit::float8,
	greatest(epsilon_limit - epsilon_spent, 0)::float8,
	greatest(delta_limit - delta_spent, 0)::float8,
	rho_spent::float8, delta_approx_spent::float8`

func (l *Ledger) scanSpend(row pgx.Row) (Spend, error) {
	s := Spend{Accounting: conf.AccountingBasic}
	err := row.Scan(&s.EpsilonSpent, &s.EpsilonLimit, &s.DeltaSpent, &s.DeltaLimit,
		&s.epsRemaining, &s.deltaRemaining, &s.Rho, &s.DeltaApprox)
	s.exact = err == nil
	if err == nil && l.zcdp {
		s.inZCDP()
	}
	return s, err
}

// beginner is a pool or one of its connections.
type beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Charge records c durably, or refuses it. It returns the analyst's budget
// after the charge. Errors, each with a SQLState method:
//
//   - *InvalidChargeError when ε is not a finite number >= 0, δ is not in
//     [0, 1), or both are 0 (likewise for ρ and the approximate δ);
//   - *UnknownAnalystError when the ledger has no budget for c.Analyst;
//   - *ExhaustedError when the charge would exceed the budget (nothing
//     is recorded);
//   - *UnavailableError for any other failure, the ledger being
//     unreachable or the commit failing. The caller must then run
//     nothing: the charge may or may not have been recorded.
//
// A query whose answer goes to the answer cache is charged through Claim
// instead, so that concurrent askers of one question pay once.
func (l *Ledger) Charge(ctx context.Context, c Charge) (Spend, error) {
	s, _, err := l.charge(ctx, l.pool, c)
	return s, err
}

// charge runs Charge on db and also returns the id of the charge's row.
func (l *Ledger) charge(ctx context.Context, db beginner, c Charge) (Spend, int64, error) {
	if err := validate(c); err != nil {
		return Spend{}, 0, err
	}
	tx, err := db.BeginTx(ctx, txOptions())
	if err != nil {
		return Spend{}, 0, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit

	rho, dApprox := c.zcdpPart()
	eps, delta := decimal(c.Epsilon), decimal(c.Delta)
	// The zCDP test is guarded by CASE, which PostgreSQL evaluates in
	// order, so ln never sees a δ' <= 0.
	s, err := l.scanSpend(tx.QueryRow(ctx, `
		UPDATE dpproxy.budgets
		SET epsilon_spent = epsilon_spent + $2::numeric,
		    delta_spent = delta_spent + $3::numeric,
		    rho_spent = rho_spent + $4::numeric,
		    delta_approx_spent = delta_approx_spent + $5::numeric,
		    updated_at = now()
		WHERE analyst = $1
		  AND ((epsilon_spent + $2::numeric <= epsilon_limit AND delta_spent + $3::numeric <= delta_limit)
		       OR CASE WHEN $6::boolean AND delta_approx_spent + $5::numeric < delta_limit
		               THEN rho_spent + $4::numeric + 2 * sqrt((rho_spent + $4::numeric)
		                    * ln(1 / (delta_limit - delta_approx_spent - $5::numeric))) <= epsilon_limit
		               ELSE false END)
		RETURNING `+spendColumns, c.Analyst, eps, delta, decimal(rho), decimal(dApprox), l.zcdp))
	if errors.Is(err, pgx.ErrNoRows) {
		return Spend{}, 0, l.refusal(ctx, tx, c)
	}
	if err != nil {
		return Spend{}, 0, unavailable(err)
	}
	var id int64
	if err := tx.QueryRow(ctx, `
		INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, rho, delta_approx, action, actor)
		VALUES ($1, $2, $3::numeric, $4::numeric, $5::numeric, $6::numeric, 'charge', $1)
		RETURNING id`,
		c.Analyst, c.Fingerprint, eps, delta, decimal(rho), decimal(dApprox)).Scan(&id); err != nil {
		return Spend{}, 0, unavailable(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Spend{}, 0, unavailable(err)
	}
	return s, id, nil
}

// refusal explains why the conditional UPDATE matched no row.
func (l *Ledger) refusal(ctx context.Context, tx pgx.Tx, c Charge) error {
	s, err := l.scanSpend(tx.QueryRow(ctx,
		`SELECT `+spendColumns+` FROM dpproxy.budgets WHERE analyst = $1`, c.Analyst))
	if errors.Is(err, pgx.ErrNoRows) {
		return &UnknownAnalystError{Analyst: c.Analyst}
	}
	if err != nil {
		return unavailable(err)
	}
	return &ExhaustedError{Requested: c, Remaining: s}
}

// Spent returns the analyst's current budget. It returns
// *UnknownAnalystError for an analyst not in the ledger and
// *UnavailableError when the ledger cannot be read.
func (l *Ledger) Spent(ctx context.Context, analyst string) (Spend, error) {
	s, err := l.scanSpend(l.pool.QueryRow(ctx,
		`SELECT `+spendColumns+` FROM dpproxy.budgets WHERE analyst = $1`, analyst))
	if errors.Is(err, pgx.ErrNoRows) {
		return Spend{}, &UnknownAnalystError{Analyst: analyst}
	}
	if err != nil {
		return Spend{}, unavailable(err)
	}
	return s, nil
}

func validate(c Charge) error {
	switch {
	case !(c.Epsilon >= 0) || math.IsInf(c.Epsilon, 0): // !(>=) catches NaN
		return &InvalidChargeError{Reason: fmt.Sprintf("ε must be a finite number >= 0, got %v", c.Epsilon)}
	case !conf.ValidDelta(c.Delta):
		return &InvalidChargeError{Reason: fmt.Sprintf("δ must lie in [0, 1), got %v", c.Delta)}
	case c.Epsilon == 0 && c.Delta == 0:
		return &InvalidChargeError{Reason: "ε and δ are both 0"}
	case !(c.Rho >= 0) || math.IsInf(c.Rho, 0):
		return &InvalidChargeError{Reason: fmt.Sprintf("ρ must be a finite number >= 0, got %v", c.Rho)}
	case !conf.ValidDelta(c.DeltaApprox):
		return &InvalidChargeError{Reason: fmt.Sprintf("approximate δ must lie in [0, 1), got %v", c.DeltaApprox)}
	}
	return nil
}

// decimal formats f as the shortest decimal that parses back to f, which
// PostgreSQL's numeric input reads exactly: 0.1 stays 0.1, not
// 0.1000000000000000055511151231257827.
func decimal(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ExhaustedError refuses a charge that would exceed the analyst's budget.
// Nothing was recorded.
type ExhaustedError struct {
	Requested Charge
	// Remaining is the analyst's budget as the refusal found it.
	Remaining Spend
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("privacy budget exceeded: this query needs ε=%v, δ=%v; remaining ε=%v, δ=%v",
		e.Requested.Epsilon, e.Requested.Delta, e.Remaining.EpsilonRemaining(), e.Remaining.DeltaRemaining())
}

// SQLState is insufficient_resources.
func (e *ExhaustedError) SQLState() string { return "53400" }

// UnavailableError means the ledger could not be read or written, so the
// query must not run. Error is safe to show clients; the cause, which may
// name hosts, is in Err and in LogValue for logs.
//
// It has no Unwrap method on purpose: errors.As must not find the cause's
// *pgconn.PgError (a ledger failure such as a constraint violation), which
// the proxy would pass on to the client verbatim. errors.Is still sees the
// cause (context.Canceled, for one) through Is.
type UnavailableError struct {
	Err error
}

func unavailable(err error) error { return &UnavailableError{Err: err} }

func (e *UnavailableError) Error() string {
	if e.canceled() {
		return "canceling statement due to user request: nothing was run"
	}
	return "privacy budget ledger unavailable: nothing was run"
}

// Is reports whether the cause is target, so that errors.Is(err,
// context.Canceled) holds for a canceled ledger call.
func (e *UnavailableError) Is(target error) bool { return errors.Is(e.Err, target) }

// SQLState is connection_failure, or query_canceled when the caller's
// context was canceled.
func (e *UnavailableError) SQLState() string {
	if e.canceled() {
		return "57014"
	}
	return "08006"
}

func (e *UnavailableError) canceled() bool { return errors.Is(e.Err, context.Canceled) }

// LogValue implements slog.LogValuer: the client message and the cause.
func (e *UnavailableError) LogValue() slog.Value {
	cause := "<nil>"
	if e.Err != nil {
		cause = e.Err.Error()
	}
	return slog.GroupValue(slog.String("msg", e.Error()), slog.String("cause", cause))
}

// UnknownAnalystError means the ledger has no budget for the analyst (not
// configured, or the configuration changed without Open).
type UnknownAnalystError struct {
	Analyst string
}

func (e *UnknownAnalystError) Error() string {
	return fmt.Sprintf("no privacy budget for analyst %q", e.Analyst)
}

// SQLState is insufficient_privilege.
func (e *UnknownAnalystError) SQLState() string { return "42501" }

// InvalidChargeError rejects an ε or δ that is not finite or out of range.
type InvalidChargeError struct {
	Reason string
}

func (e *InvalidChargeError) Error() string { return "invalid privacy charge: " + e.Reason }

// SQLState is invalid_parameter_value.
func (e *InvalidChargeError) SQLState() string { return "22023" }
