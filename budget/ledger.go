// Package budget keeps each analyst's privacy budget in a durable ledger in
// PostgreSQL (schema dpproxy) and caches noisy answers so that repeating a
// query neither costs budget nor averages the noise away.
//
// The ledger charges before anything runs: Ledger.Charge commits the spend
// and a record of it in one transaction, and only then may the caller send
// the query upstream. A charge is never refunded (a refund on failure would
// make failures a side channel).
//
// Spent and limit columns are numeric, so ten charges of 0.1 add up to
// exactly 1.0. Values go to the database as the shortest decimal that
// round-trips the float64 (0.1 is sent as "0.1"); the ledger reads the
// columns back as numeric text and adds and compares them exactly
// (Numeric), and shows them as the float64 nearest to the exact decimal.
//
// Concurrency: a charge locks the analyst's row (SELECT ... FOR UPDATE)
// before it reads the totals and limits, and writes the new totals in the
// same transaction, so concurrent charges from any number of connections
// and proxy processes serialize on the row (each reads what the one before
// it wrote) and can never overspend together.
//
// Accounting: an Accountant (accountant.go) decides whether a charge fits
// and what the new totals are; the ledger does the I/O around it. Every
// charge adds its (ε, δ) and its zCDP cost (ρ and the δ of its approximate
// part) to the analyst's row, under any accounting. Basic accounting
// (basic.go) admits a charge when Σε and Σδ stay within the limits; zCDP
// accounting (zcdp.go) when either that holds or the zCDP totals,
// converted to (ε, δ) with the rest of the δ limit, do (both bound the same
// sequence of mechanisms, so either suffices). Every charge also adds ε² to
// Σε² (epsilon_sq_spent), which advanced accounting (advanced.go) uses: a
// privacy filter for advanced composition, valid with adaptively chosen ε.
// Every charge also records its releases (mechanism, sensitivity, scale,
// ε, δ) in dpproxy.releases, in its transaction; the Rényi accountant
// (rdp.go, the default) composes their curves, with its per-order sums
// kept in dpproxy.budgets and recomputed from the releases when stale
// (rdpfold.go).
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
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dpproxy/dpproxy/conf"
)

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
	// Accounting names the ledger's Accountant: conf.AccountingBasic
	// (also when empty), conf.AccountingZCDP or conf.AccountingAdvanced;
	// see NewAccountantWith.
	Accounting string
	// AdvancedDelta is δ′ of the advanced accountant (privacy.advanced_delta;
	// 0 means conf.DefaultAdvancedDelta).
	AdvancedDelta float64
	// RDPDeltaShare is the RDP filter's share of δ for its conversion
	// (privacy.rdp_delta_share; 0 means conf.DefaultRDPDeltaShare).
	RDPDeltaShare float64
	// TableBudgets are the per-table budgets, by qualified table name
	// (conf.Config.TableBudgets; tables.go). Open sets their limits.
	TableBudgets map[string]conf.Budget
}

// Ledger is the durable budget ledger. It is safe for concurrent use, and
// several processes may share one ledger database.
type Ledger struct {
	pool *pgxpool.Pool // not owned: the caller closes it
	acct Accountant    // read-only after Open
	// tables are the names of the configured table budgets, sorted
	// (tables.go); read-only after Open.
	tables []string
}

func newLedger(pool *pgxpool.Pool, opts Options) (*Ledger, error) {
	a, err := NewAccountantWith(opts)
	if err != nil {
		return nil, err
	}
	return &Ledger{pool: pool, acct: a, tables: sortedKeys(opts.TableBudgets)}, nil
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
			var hadSq bool
			if err := tx.QueryRow(ctx, hasEpsilonSq).Scan(&hadSq); err != nil {
				return fmt.Errorf("check schema: %w", err)
			}
			for _, stmt := range schemaDDL() {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
			if !hadSq {
				if _, err := tx.Exec(ctx, migrateEpsilonSq); err != nil {
					return fmt.Errorf("migrate Σε²: %w", err)
				}
			}
			for _, stmt := range tableDDL() { // tables.go
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
		return openTables(ctx, tx, opts.TableBudgets) // tables.go
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
	// Releases are the query's randomized parts (release.go), recorded
	// in dpproxy.releases; the RDP accountant composes their curves. A
	// charge without releases is read as one (ε, δ)-DP release of
	// unknown kind (MechPure).
	Releases []Release
	// Fingerprint identifies the query in the ledger's record (a
	// pg_query fingerprint; never raw SQL, which may hold values).
	Fingerprint string
	// Tables are the private tables the query reads (qualified names):
	// the charge counts against the budget of each that has one
	// (tables.go).
	Tables []string
}

// budgetColumns are the columns of a dpproxy.budgets row an accountant
// reads, as numeric text, so that nothing is rounded (see budgetRow).
const budgetColumns = `epsilon_spent::text, delta_spent::text,
	rho_spent::text, delta_approx_spent::text,
	epsilon_limit::text, delta_limit::text, epsilon_sq_spent::text`

// budgetRow receives budgetColumns.
type budgetRow [7]string

// dest is the Scan destinations of budgetColumns.
func (r *budgetRow) dest() []any {
	return []any{&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6]}
}

// parse returns the row's totals and limits.
func (r *budgetRow) parse() (Totals, Limits, error) {
	var n [7]Numeric
	for i, s := range r {
		var err error
		if n[i], err = ParseNumeric(s); err != nil {
			return Totals{}, Limits{}, err
		}
	}
	return Totals{Epsilon: n[0], Delta: n[1], Rho: n[2], DeltaApprox: n[3], EpsilonSq: n[6]}, Limits{Epsilon: n[4], Delta: n[5]}, nil
}

// scanSpend reads one budgetColumns row of the analyst and reports it with
// l's accountant (reading the Rényi sums through q when it needs them).
func (l *Ledger) scanSpend(ctx context.Context, q querier, analyst string, row pgx.Row) (Spend, error) {
	var r budgetRow
	if err := row.Scan(r.dest()...); err != nil {
		return Spend{}, err
	}
	t, lim, err := r.parse()
	if err != nil {
		return Spend{}, err
	}
	if t, err = l.withRDP(ctx, q, analyst, t); err != nil {
		return Spend{}, err
	}
	return l.acct.Report(t, lim), nil
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
	s, _, err := l.charge(ctx, l.pool, c, nil)
	return s, err
}

// charge runs Charge on db and also returns the id of the charge's row.
//
// The transaction locks the analyst's row first (FOR UPDATE), so a
// concurrent charge waits there until this one commits or rolls back, and
// then reads the totals this one wrote (under READ COMMITTED, a row read
// FOR UPDATE after waiting for its lock is its latest committed version):
// the accountant always decides on the current totals and limits, and the
// UPDATE writes the totals it computed with no lost update in between.
// Grant and Open's limit upsert update the same row, so they wait for the
// lock too. TestConcurrentCharges and TestZCDPConcurrentChargesNeverOverspend
// fail without it.
func (l *Ledger) charge(ctx context.Context, db beginner, c Charge, after *afterCharge) (Spend, int64, error) {
	if err := validate(c); err != nil {
		return Spend{}, 0, err
	}
	tx, err := db.BeginTx(ctx, txOptions())
	if err != nil {
		return Spend{}, 0, unavailable(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit

	var r budgetRow
	err = tx.QueryRow(ctx, `SELECT `+budgetColumns+` FROM dpproxy.budgets WHERE analyst = $1 FOR UPDATE`,
		c.Analyst).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Spend{}, 0, &UnknownAnalystError{Analyst: c.Analyst}
	}
	if err != nil {
		return Spend{}, 0, unavailable(err)
	}
	totals, limits, err := r.parse()
	if err != nil {
		return Spend{}, 0, unavailable(err)
	}
	if totals, err = l.withRDP(ctx, tx, c.Analyst, totals); err != nil {
		return Spend{}, 0, unavailable(err)
	}
	next, ok := l.acct.Compose(totals, limits, c)
	if !ok {
		return Spend{}, 0, &ExhaustedError{Requested: c, Remaining: l.acct.Report(totals, limits)}
	}
	tables, err := l.composeTables(ctx, tx, c) // tables.go: locks after the analyst's row
	if err != nil {
		return Spend{}, 0, err
	}
	// The new totals go in as numeric text of the same value and scale
	// PostgreSQL's own epsilon_spent + $2 would have given (Numeric).
	if _, err := tx.Exec(ctx, `
		UPDATE dpproxy.budgets
		SET epsilon_spent = $2::numeric,
		    delta_spent = $3::numeric,
		    rho_spent = $4::numeric,
		    delta_approx_spent = $5::numeric,
		    epsilon_sq_spent = $6::numeric,
		    updated_at = now()
		WHERE analyst = $1`,
		c.Analyst, next.Epsilon.String(), next.Delta.String(), next.Rho.String(), next.DeltaApprox.String(),
		next.EpsilonSq.String()); err != nil {
		return Spend{}, 0, unavailable(err)
	}
	rho, dApprox := c.zcdpPart()
	var id int64
	if err := tx.QueryRow(ctx, `
		INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, rho, delta_approx, action, actor)
		VALUES ($1, $2, $3::numeric, $4::numeric, $5::numeric, $6::numeric, 'charge', $1)
		RETURNING id`,
		c.Analyst, c.Fingerprint, decimal(c.Epsilon), decimal(c.Delta), decimal(rho), decimal(dApprox)).Scan(&id); err != nil {
		return Spend{}, 0, unavailable(err)
	}
	var rdp []float64
	if l.usesRDP() {
		rdp = next.RDP
	}
	if err := recordReleases(ctx, tx, c, id, rdp); err != nil {
		return Spend{}, 0, unavailable(err)
	}
	if err := l.writeTables(ctx, tx, id, tables); err != nil {
		return Spend{}, 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Spend{}, 0, unavailable(err)
	}
	if after != nil {
		*after = afterCharge{acct: l.acct, t: next, lim: limits, c: c, tables: tables} // fits.go
	}
	return l.acct.Report(next, limits), id, nil
}

// Spent returns the analyst's current budget. It returns
// *UnknownAnalystError for an analyst not in the ledger and
// *UnavailableError when the ledger cannot be read.
func (l *Ledger) Spent(ctx context.Context, analyst string) (Spend, error) {
	s, err := l.scanSpend(ctx, l.pool, analyst, l.pool.QueryRow(ctx,
		`SELECT `+budgetColumns+` FROM dpproxy.budgets WHERE analyst = $1`, analyst))
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
	return validateReleases(c)
}

// decimal formats f as the shortest decimal that parses back to f, which
// PostgreSQL's numeric input reads exactly: 0.1 stays 0.1, not
// 0.1000000000000000055511151231257827.
func decimal(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
