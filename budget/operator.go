package budget

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
)

// OperatorSubject is the ledger row that records what operator tools
// (dpproxy bounds) spend on the data. No analyst can be charged under it
// (conf refuses analyst names starting with "@"); its limit grows with
// its spend, so it reads as spent = limit, remaining 0.
const OperatorSubject = "@operator"

// OperatorCharge records, durably and before anything is read, that an
// operator tool (actor, e.g. "bounds") spends (eps, 0)-DP on the data:
// one row in dpproxy.charges (action "charge", analyst OperatorSubject,
// fingerprint naming what was measured) and the running totals of
// OperatorSubject's row in dpproxy.budgets, in one transaction. The
// operator's spend has no limit: the operator owns the data. It does
// count against the budget of every table it reads (tables, qualified
// names): what it measures is published to every analyst (the bias
// metadata of the NOTICE and EXPLAIN DP), so it is part of what everyone
// together learns about the table's rows. The charge is recorded as
// touching each table (dpproxy.charge_tables) and added to the spend of
// each that has a row in dpproxy.table_budgets, never refused; a table
// whose budget is configured later starts with it, as with any charge.
// Errors: *InvalidChargeError for a bad ε, *UnavailableError otherwise.
func (l *Ledger) OperatorCharge(ctx context.Context, actor string, eps float64, fingerprint string, tables ...string) error {
	if !(eps > 0) || math.IsInf(eps, 0) {
		return &InvalidChargeError{Reason: fmt.Sprintf("operator ε must be a finite number > 0, got %v", eps)}
	}
	rho := eps * eps / 2 // pure ε-DP is ε²/2-zCDP
	err := pgx.BeginTxFunc(ctx, l.pool, txOptions(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO dpproxy.budgets AS b (analyst, epsilon_limit, delta_limit, epsilon_spent, rho_spent, epsilon_sq_spent, updated_at)
			VALUES ($1, $2::numeric, 0, $2::numeric, $3::numeric, $4::numeric, now())
			ON CONFLICT (analyst) DO UPDATE
			SET epsilon_limit = b.epsilon_limit + $2::numeric, epsilon_spent = b.epsilon_spent + $2::numeric,
			    rho_spent = b.rho_spent + $3::numeric, epsilon_sq_spent = b.epsilon_sq_spent + $4::numeric,
			    updated_at = now()`,
			OperatorSubject, decimal(eps), decimal(rho), decimal(eps*eps)); err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRow(ctx, `
			INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, rho, delta_approx, action, actor)
			VALUES ($1, $2, $3::numeric, 0, $4::numeric, 0, 'charge', $5) RETURNING id`,
			OperatorSubject, fingerprint, decimal(eps), decimal(rho), actor).Scan(&id); err != nil {
			return err
		}
		for _, name := range lockOrder(tables) {
			// The table's Rényi sums are then behind its newest charge
			// and are recomputed (tablesrdp.go), reading this charge
			// (no releases) as a pure ε release.
			if _, err := tx.Exec(ctx, `
				UPDATE dpproxy.table_budgets
				SET epsilon_spent = epsilon_spent + $2::numeric, rho_spent = rho_spent + $3::numeric,
				    epsilon_sq_spent = epsilon_sq_spent + $4::numeric, updated_at = now()
				WHERE table_name = $1`, name, decimal(eps), decimal(rho), decimal(eps*eps)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO dpproxy.charge_tables (charge_id, table_name) VALUES ($1, $2)`, id, name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	return nil
}
