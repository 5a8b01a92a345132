package budget

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
)

// The Rényi accountant's sums (Totals.RDP) are a fold of the recorded
// releases. dpproxy.budgets keeps them as a fast path: rdp_spent (one sum
// per order of rdp_orders, then the ∞ order) and rdp_through, the id of
// the last charge folded in. They are stale, and recomputed from
// dpproxy.releases and dpproxy.charges, when missing (a ledger created
// before them), when rdp_orders is not this version's grid, or when the
// analyst has a charge after rdp_through (charged by another accounting,
// which does not keep them, or by an older dpproxy): so switching
// accounting, changing the grid or upgrading never loses or forgives spend.
//
// A charge recorded without releases (every charge before
// dpproxy.releases existed) is read as one release of unknown kind,
// (ε, δ)-DP taken as δ-approximately ε-DP (MechPure, rdp.go): the most any
// (ε, δ)-DP mechanism can cost under this reading.

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// rdpGrid is the stored form of the grid: rdpOrders then +Inf.
func rdpGrid() []float64 {
	return append(slices.Clone(rdpOrders), math.Inf(1))
}

// loadRDP returns the analyst's current sums, recomputed from the history
// when the stored ones are stale. In a charge it runs after the row lock,
// so no charge of the analyst commits in between.
func loadRDP(ctx context.Context, q querier, analyst string) ([]float64, error) {
	var spent, orders []float64
	var through, last *int64
	if err := q.QueryRow(ctx, `
		SELECT rdp_spent, rdp_orders, rdp_through,
		       (SELECT max(id) FROM dpproxy.charges WHERE analyst = $1 AND action = 'charge')
		FROM dpproxy.budgets WHERE analyst = $1`, analyst).Scan(&spent, &orders, &through, &last); err != nil {
		return nil, err
	}
	fresh := spent != nil && len(spent) == len(rdpOrders)+1 && slices.Equal(orders, rdpGrid()) &&
		((last == nil && through == nil) || (last != nil && through != nil && *last == *through))
	if fresh {
		return spent, nil
	}
	return foldRDP(ctx, q, analyst)
}

// foldRDP computes the analyst's sums from every charge and its releases,
// in the order they were charged.
func foldRDP(ctx context.Context, q querier, analyst string) ([]float64, error) {
	return foldReleases(ctx, q, `WHERE c.analyst = $1 AND c.action = 'charge'`, analyst)
}

// foldReleases computes the sums over the charges where (a WHERE clause,
// or joins then one, over dpproxy.charges c; its parameter $1 is arg)
// selects, in the order they were charged.
func foldReleases(ctx context.Context, q querier, where string, arg any) ([]float64, error) {
	rows, err := q.Query(ctx, `
		SELECT c.id, c.epsilon::float8, c.delta::float8,
		       r.mechanism, r.l0, r.sensitivity, r.scale, r.epsilon, r.delta
		FROM dpproxy.charges c LEFT JOIN dpproxy.releases r ON r.charge_id = c.id
		`+where+`
		ORDER BY c.id, r.ordinal`, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sums := make([]float64, len(rdpOrders)+1)
	var cur int64 = -1
	var pending Charge
	flush := func() {
		if cur >= 0 {
			sums = plusRDP(sums, pending.releases())
		}
	}
	for rows.Next() {
		var id int64
		var eps, delta float64
		var mech *string
		var l0 *int64
		var sens, scale, reps, rdelta *float64
		if err := rows.Scan(&id, &eps, &delta, &mech, &l0, &sens, &scale, &reps, &rdelta); err != nil {
			return nil, err
		}
		if id != cur {
			flush()
			cur, pending = id, Charge{Epsilon: eps, Delta: delta}
		}
		if mech != nil {
			r := Release{Mechanism: Mechanism(*mech), L0: *l0, Sensitivity: *sens, Scale: *scale, Epsilon: *reps, Delta: *rdelta}
			if err := r.check(); err != nil {
				return nil, fmt.Errorf("charge %d: %w", id, err)
			}
			pending.Releases = append(pending.Releases, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	flush()
	return sums, nil
}

// recordReleases writes the charge's releases (the one it is read as when
// it states none) in dpproxy.releases, and, when rdp is not nil, the
// analyst's new sums with chargeID as the last folded; in the charge's
// transaction.
func recordReleases(ctx context.Context, tx pgx.Tx, c Charge, chargeID int64, rdp []float64) error {
	rs := c.releases()
	var (
		mech                    = make([]string, len(rs))
		l0                      = make([]int64, len(rs))
		sens, scale, eps, delta = make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs))
	)
	for i, r := range rs {
		mech[i], l0[i], sens[i], scale[i], eps[i], delta[i] = string(r.Mechanism), r.L0, r.Sensitivity, r.Scale, r.Epsilon, r.Delta
	}
	const insert = `
		INSERT INTO dpproxy.releases (charge_id, ordinal, mechanism, l0, sensitivity, scale, epsilon, delta)
		SELECT $1, u.o, u.m, u.l, u.s, u.sc, u.e, u.d
		FROM unnest($2::text[], $3::int8[], $4::float8[], $5::float8[], $6::float8[], $7::float8[])
		     WITH ORDINALITY AS u(m, l, s, sc, e, d, o)`
	if rdp == nil {
		_, err := tx.Exec(ctx, insert, chargeID, mech, l0, sens, scale, eps, delta)
		return err
	}
	// One round trip: the releases and the analyst's new sums.
	_, err := tx.Exec(ctx, `WITH ins AS (`+insert+`)
		UPDATE dpproxy.budgets SET rdp_spent = $9, rdp_orders = $10, rdp_through = $1 WHERE analyst = $8`,
		chargeID, mech, l0, sens, scale, eps, delta, c.Analyst, rdp, rdpGrid())
	return err
}

// usesRDP reports whether l's accountant reads Totals.RDP; other
// accountants leave the stored sums to go stale (recomputed on a switch).
func (l *Ledger) usesRDP() bool {
	_, ok := l.acct.(rdpAccountant)
	return ok
}

// withRDP fills t.RDP for the analyst when l's accountant uses it.
func (l *Ledger) withRDP(ctx context.Context, q querier, analyst string, t Totals) (Totals, error) {
	if !l.usesRDP() {
		return t, nil
	}
	var err error
	t.RDP, err = loadRDP(ctx, q, analyst)
	return t, err
}
