package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// Account is one analyst's budget, as an operator lists it.
type Account struct {
	Analyst string
	Spend
	// Answers is the number of answers stored for the analyst (each paid
	// for by one charge).
	Answers int64
}

// List returns every analyst in the ledger, by name.
func (l *Ledger) List(ctx context.Context) ([]Account, error) {
	rows, err := l.pool.Query(ctx, `SELECT b.analyst, (SELECT count(*) FROM dpproxy.answers a WHERE a.analyst = b.analyst), `+
		budgetColumns+` FROM dpproxy.budgets b ORDER BY b.analyst`)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Account
	var totals []budgetState
	for rows.Next() {
		var a Account
		var r budgetRow
		if err := rows.Scan(append([]any{&a.Analyst, &a.Answers}, r.dest()...)...); err != nil {
			return nil, unavailable(err)
		}
		t, lim, err := r.parse()
		if err != nil {
			return nil, unavailable(err)
		}
		a.Spend = l.acct.Report(t, lim)
		out = append(out, a)
		totals = append(totals, budgetState{t, lim})
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	rows.Close()
	// The Rényi sums, read once the rows are done (they may need a fold).
	for i := range out {
		if !l.usesRDP() {
			break
		}
		t, err := l.withRDP(ctx, l.pool, out[i].Analyst, totals[i].t)
		if err != nil {
			return nil, unavailable(err)
		}
		out[i].Spend = l.acct.Report(t, totals[i].l)
	}
	return out, nil
}

// budgetState is a row's totals and limits.
type budgetState struct {
	t Totals
	l Limits
}

// Record is one row of the append-only audit log dpproxy.charges.
type Record struct {
	ID int64
	At time.Time
	// Action is "charge" (a query spent Epsilon, Delta), "grant" (an
	// operator added Epsilon, Delta to the limits) or "limit" (the limits
	// were set to Epsilon, Delta from the configuration).
	Action      string
	Actor       string
	Analyst     string
	Fingerprint string
	Epsilon     float64
	Delta       float64
	Rho         float64
	DeltaApprox float64
	// Releases are a charge's releases as dpproxy.releases recorded them
	// (mechanism, L0, sensitivity, scale, ε, δ), in order; none for a
	// grant, a limit or a charge recorded before releases were.
	Releases []Release
}

// History returns the analyst's newest n audit records, newest first,
// each charge with its releases.
func (l *Ledger) History(ctx context.Context, analyst string, n int) ([]Record, error) {
	rows, err := l.pool.Query(ctx, `
		SELECT id, at, action, actor, analyst, fingerprint, epsilon::float8, delta::float8, rho::float8, delta_approx::float8
		FROM dpproxy.charges WHERE analyst = $1 ORDER BY id DESC LIMIT $2`, analyst, n)
	if err != nil {
		return nil, unavailable(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Record, error) {
		var rec Record
		err := r.Scan(&rec.ID, &rec.At, &rec.Action, &rec.Actor, &rec.Analyst, &rec.Fingerprint, &rec.Epsilon, &rec.Delta, &rec.Rho, &rec.DeltaApprox)
		return rec, err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	ids := make([]int64, len(out))
	at := make(map[int64]int, len(out))
	for i, r := range out {
		ids[i], at[r.ID] = r.ID, i
	}
	rows, err = l.pool.Query(ctx, `
		SELECT charge_id, mechanism, l0, sensitivity, scale, epsilon, delta
		FROM dpproxy.releases WHERE charge_id = ANY($1) ORDER BY charge_id, ordinal`, ids)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r Release
		if err := rows.Scan(&id, &r.Mechanism, &r.L0, &r.Sensitivity, &r.Scale, &r.Epsilon, &r.Delta); err != nil {
			return nil, unavailable(err)
		}
		out[at[id]].Releases = append(out[at[id]].Releases, r)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// Grant adds eps and delta to the analyst's limits (negative values take
// budget away) and records the change, with actor, in the audit log. The
// grant survives restarts: Open sets each limit to the configured budget
// plus every grant. The new limits must stay a valid budget (ε > 0, δ in
// [0, 1)). Errors: *InvalidChargeError for bad amounts or limits,
// *UnknownAnalystError, *UnavailableError.
func (l *Ledger) Grant(ctx context.Context, analyst string, eps, delta float64, actor string) (Spend, error) {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || math.IsNaN(delta) || math.IsInf(delta, 0) {
		return Spend{}, &InvalidChargeError{Reason: fmt.Sprintf("grant of ε=%v, δ=%v: amounts must be finite", eps, delta)}
	}
	if eps == 0 && delta == 0 {
		return Spend{}, &InvalidChargeError{Reason: "grant of ε=0, δ=0 changes nothing"}
	}
	var s Spend
	err := pgx.BeginTxFunc(ctx, l.pool, txOptions(), func(tx pgx.Tx) error {
		var err error
		s, err = l.scanSpend(ctx, tx, analyst, tx.QueryRow(ctx, `
			UPDATE dpproxy.budgets
			SET epsilon_limit = epsilon_limit + $2::numeric, epsilon_granted = epsilon_granted + $2::numeric,
			    delta_limit = delta_limit + $3::numeric, delta_granted = delta_granted + $3::numeric,
			    updated_at = now()
			WHERE analyst = $1 AND epsilon_limit + $2::numeric > 0
			  AND delta_limit + $3::numeric >= 0 AND delta_limit + $3::numeric < 1
			RETURNING `+budgetColumns, analyst, decimal(eps), decimal(delta)))
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dpproxy.budgets WHERE analyst = $1)`, analyst).Scan(&exists); err != nil {
				return unavailable(err)
			}
			if !exists {
				return &UnknownAnalystError{Analyst: analyst}
			}
			return &InvalidChargeError{Reason: fmt.Sprintf("grant of ε=%v, δ=%v would leave a limit with ε <= 0 or δ outside [0, 1)", eps, delta)}
		}
		if err != nil {
			return unavailable(err)
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, action, actor)
			VALUES ($1, '', $2::numeric, $3::numeric, 'grant', $4)`, analyst, decimal(eps), decimal(delta), actor)
		if err != nil {
			return unavailable(err)
		}
		return nil
	})
	if err != nil {
		var sq interface{ SQLState() string }
		if errors.As(err, &sq) {
			return Spend{}, err
		}
		return Spend{}, unavailable(err)
	}
	return s, nil
}
