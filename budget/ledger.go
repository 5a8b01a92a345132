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

// schemaDDL creates the ledger's schema and tables.
func schemaDDL() []string {
	return []string{
		`CREATE SCHEMA IF NOT EXISTS dpproxy`,
		`CREATE TABLE IF NOT EXISTS dpproxy.budgets (
			analyst       text PRIMARY KEY,
			epsilon_limit numeric NOT NULL,
			delta_limit   numeric NOT NULL,
			epsilon_spent numeric NOT NULL DEFAULT 0,
			delta_spent   numeric NOT NULL DEFAULT 0,
			updated_at    timestamptz
		)`,
		`CREATE TABLE IF NOT EXISTS dpproxy.charges (
			id          bigserial PRIMARY KEY,
			analyst     text NOT NULL,
			at          timestamptz NOT NULL DEFAULT now(),
			fingerprint text NOT NULL,
			epsilon     numeric NOT NULL,
			delta       numeric NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS charges_analyst_at ON dpproxy.charges (analyst, at)`,
	}
}

// txOptions begins every ledger transaction explicitly READ WRITE, since the
// pool's connections may default to read-only transactions
// (default_transaction_read_only=on, as the proxy's query traffic runs), and
// READ COMMITTED, since under a stricter default isolation concurrent charges
// would fail with serialization errors instead of waiting for the row lock.
func txOptions() pgx.TxOptions {
	return pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite}
}

// Ledger is the durable budget ledger. It is safe for concurrent use, and
// several processes may share one ledger database.
type Ledger struct {
	pool *pgxpool.Pool // not owned: the caller closes it
}

// Open creates the dpproxy schema and its tables if missing and sets each
// analyst's limits from users (adding analysts not yet in the ledger with
// nothing spent). It never changes what was spent, so lowering a limit
// below the spend simply exhausts the budget. Analysts in the ledger but not
// in users are left alone. The caller keeps ownership of pool.
func Open(ctx context.Context, pool *pgxpool.Pool, users []conf.User) (*Ledger, error) {
	for _, u := range users {
		if u.Name == "" {
			return nil, errors.New("budget: open: analyst with no name")
		}
		if !conf.ValidEpsilon(u.Budget.Epsilon) || !conf.ValidDelta(u.Budget.Delta) {
			return nil, fmt.Errorf("budget: open: analyst %q: invalid budget ε=%v, δ=%v", u.Name, u.Budget.Epsilon, u.Budget.Delta)
		}
	}
	err := pgx.BeginTxFunc(ctx, pool, txOptions(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		// Skip DDL when the tables exist, so that a role without CREATE
		// on the database can use a ledger created by someone else.
		var exists bool
		err := tx.QueryRow(ctx, `SELECT to_regclass('dpproxy.budgets') IS NOT NULL
			AND to_regclass('dpproxy.charges') IS NOT NULL`).Scan(&exists)
		if err != nil {
			return fmt.Errorf("check schema: %w", err)
		}
		if !exists {
			for _, stmt := range schemaDDL() {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
		}
		for _, u := range users {
			_, err := tx.Exec(ctx, `
				INSERT INTO dpproxy.budgets AS b (analyst, epsilon_limit, delta_limit, updated_at)
				VALUES ($1, $2::numeric, $3::numeric, now())
				ON CONFLICT (analyst) DO UPDATE
				SET epsilon_limit = EXCLUDED.epsilon_limit,
				    delta_limit = EXCLUDED.delta_limit,
				    updated_at = now()
				WHERE b.epsilon_limit IS DISTINCT FROM EXCLUDED.epsilon_limit
				   OR b.delta_limit IS DISTINCT FROM EXCLUDED.delta_limit`,
				u.Name, decimal(u.Budget.Epsilon), decimal(u.Budget.Delta))
			if err != nil {
				return fmt.Errorf("set limits of %q: %w", u.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("budget: open: %w", err)
	}
	return &Ledger{pool: pool}, nil
}

// Charge is one query's cost to one analyst.
type Charge struct {
	Analyst string
	Epsilon float64
	Delta   float64
	// Fingerprint identifies the query in the ledger's record (a
	// pg_query fingerprint; never raw SQL, which may hold values).
	Fingerprint string
}

// Spend is an analyst's budget at one moment.
type Spend struct {
	EpsilonSpent, EpsilonLimit float64
	DeltaSpent, DeltaLimit     float64

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

// spendColumns reads a budgets row into a Spend (see scanSpend).
const spendColumns = `epsilon_spent::float8, epsilon_limit::float8,
	delta_spent::float8, delta_limit::float8,
	greatest(epsilon_limit - epsilon_spent, 0)::float8,
	greatest(delta_limit - delta_spent, 0)::float8`

func scanSpend(row pgx.Row) (Spend, error) {
	var s Spend
	err := row.Scan(&s.EpsilonSpent, &s.EpsilonLimit, &s.DeltaSpent, &s.DeltaLimit,
		&s.epsRemaining, &s.deltaRemaining)
	s.exact = err == nil
	return s, err
}

// Charge records c durably, or refuses it. It returns the analyst's budget
// after the charge. Errors, each with a SQLState method:
//
//   - *InvalidChargeError when ε is not a finite number >= 0, δ is not in
//     [0, 1), or both are 0;
//   - *UnknownAnalystError when the ledger has no budget for c.Analyst;
//   - *ExhaustedError when the charge would exceed either limit (nothing
//     is recorded);
//   - *UnavailableError for any other failure, the ledger being
//     unreachable or the commit failing. The caller must then run
//     nothing: the charge may or may not have been recorded.
func (l *Ledger) Charge(ctx context.Context, c Charge) (Spend, error) {
	if err := validate(c); err != nil {
		return Spend{}, err
	}
	tx, err := l.pool.BeginTx(ctx, txOptions())
	if err != nil {
		return Spend{}, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit

	eps, delta := decimal(c.Epsilon), decimal(c.Delta)
	s, err := scanSpend(tx.QueryRow(ctx, `
		UPDATE dpproxy.budgets
		SET epsilon_spent = epsilon_spent + $2::numeric,
		    delta_spent = delta_spent + $3::numeric,
		    updated_at = now()
		WHERE analyst = $1
		  AND epsilon_spent + $2::numeric <= epsilon_limit
		  AND delta_spent + $3::numeric <= delta_limit
		RETURNING `+spendColumns, c.Analyst, eps, delta))
	if errors.Is(err, pgx.ErrNoRows) {
		return Spend{}, l.refusal(ctx, tx, c)
	}
	if err != nil {
		return Spend{}, unavailable(err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta)
		VALUES ($1, $2, $3::numeric, $4::numeric)`,
		c.Analyst, c.Fingerprint, eps, delta); err != nil {
		return Spend{}, unavailable(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Spend{}, unavailable(err)
	}
	return s, nil
}

// refusal explains why the conditional UPDATE matched no row.
func (l *Ledger) refusal(ctx context.Context, tx pgx.Tx, c Charge) error {
	s, err := scanSpend(tx.QueryRow(ctx,
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
	s, err := scanSpend(l.pool.QueryRow(ctx,
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
// name hosts, is in Err (Unwrap) and in LogValue for logs.
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

func (e *UnavailableError) Unwrap() error { return e.Err }

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
