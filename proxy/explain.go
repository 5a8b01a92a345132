package proxy

import (
	"context"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/rewrite"
)

// explainDP shows how a private query would be answered: the contribution
// bounds, each output column's mechanism, sensitivity, noise scale and 95%
// error bound, the ε/δ split, the total charge, the budget left after it and
// the rewritten SQL. It reads no table data (the upstream only describes the
// statement) and charges nothing. Its lines are the rows of one text column,
// as PostgreSQL's EXPLAIN prints them.
func (ss *session) explainDP(ctx context.Context, st *rewrite.Statement, paramOIDs []uint32) (*result, error) {
	plan := st.Plan
	desc, err := ss.describe(ctx, plan, paramOIDs)
	if err != nil {
		return nil, err
	}
	fields := desc.fields
	spec, err := ss.releaseSpec(plan)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = string(f.Name)
	}
	var left *dp.Budget
	if sp, err := ss.srv.ledger.Spent(ctx, ss.user.Name); err == nil {
		left = &dp.Budget{EpsilonLeft: sp.EpsilonRemaining(), DeltaLeft: sp.DeltaRemaining(),
			ZCDP: ss.srv.cfg.Privacy.Accounting == conf.AccountingZCDP}
	}
	lines := spec.Explain(names, left)
	rows := make([][]string, len(lines))
	for i, l := range lines {
		rows[i] = []string{l}
	}
	return textResult([]string{"QUERY PLAN"}, []uint32{oidText}, rows, "EXPLAIN"), nil
}
