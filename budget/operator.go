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
// operator's spend has no limit: the operator owns the data. Errors:
// *InvalidChargeError for a bad ε, *UnavailableError otherwise.
func (l *Ledger) OperatorCharge(ctx context.Context, actor string, eps float64, fingerprint string) error {
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
		_, err := tx.Exec(ctx, `
			INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, rho, delta_approx, action, actor)
			VALUES ($1, $2, $3::numeric, 0, $4::numeric, 0, 'charge', $5)`,
			OperatorSubject, fingerprint, decimal(eps), decimal(rho), actor)
		return err
	})
	if err != nil {
		return unavailable(err)
	}
	return nil
}
