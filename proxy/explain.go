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
	// Group keys from public tables are read as the query would read
	// them (publickeys.go), so that EXPLAIN DP says what it would cost.
	plan, _, err := ss.withPublicKeys(ctx, st.Plan)
	if err != nil {
		return nil, err
	}
	if len(plan.Branches) > 0 {
		return ss.explainUnion(ctx, plan, paramOIDs)
	}
	if plan.Auto != nil {
		return ss.explainAuto(ctx, plan, paramOIDs) // autobounds.go
	}
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
	lines := spec.Explain(names, ss.budgetLeft(ctx))
	if cost, err := spec.Cost(); err == nil { // tables.go: the budgets and how many queries fit
		lines = ss.explainWithBudgets(ctx, plan, cost, lines, spec.Explain(names, nil), len(spec.ExplainSpec(names)))
	}
	return explainResult(lines), nil
}

// budgetLeft is what the ledger says is left, nil when it cannot say.
func (ss *session) budgetLeft(ctx context.Context) *dp.Budget {
	sp, err := ss.srv.ledger.Spent(ctx, ss.user.Name)
	if err != nil {
		return nil
	}
	return &dp.Budget{EpsilonLeft: sp.EpsilonRemaining(), DeltaLeft: sp.DeltaRemaining(),
		ZCDP:     ss.srv.cfg.Privacy.Accounting == conf.AccountingZCDP,
		Advanced: ss.srv.cfg.Privacy.Accounting == conf.AccountingAdvanced,
		RDP:      ss.srv.cfg.Privacy.Accounting == conf.AccountingRDP}
}

func explainResult(lines []string) *result {
	rows := make([][]string, len(lines))
	for i, l := range lines {
		rows[i] = []string{l}
	}
	return textResult([]string{"QUERY PLAN"}, []uint32{oidText}, rows, "EXPLAIN")
}

// explainUnion is EXPLAIN DP of a UNION ALL of DP queries: the total
// charge (the sum of the branches'), then each branch as it would be
// answered alone. It reads no table data and charges nothing.
func (ss *session) explainUnion(ctx context.Context, plan *rewrite.Plan, paramOIDs []uint32) (*result, error) {
	desc, err := ss.describe(ctx, plan, paramOIDs)
	if err != nil {
		return nil, err
	}
	specs := make([]*dp.Spec, len(plan.Branches))
	names := make([][]string, len(plan.Branches))
	for i, b := range plan.Branches {
		bd, err := ss.describe(ctx, b, desc.paramOIDs)
		if err != nil {
			return nil, err
		}
		if specs[i], err = ss.releaseSpec(b); err != nil {
			return nil, err
		}
		for _, f := range bd.fields {
			names[i] = append(names[i], string(f.Name))
		}
	}
	u, err := ss.unionSpec(plan, specs)
	if err != nil {
		return nil, err
	}
	lines := u.Explain(names, ss.budgetLeft(ctx))
	if cost, err := u.Cost(); err == nil { // tables.go: the budgets and how many queries fit
		lines = ss.explainWithBudgets(ctx, plan, cost, lines, u.Explain(names, nil), len(u.ExplainSpec(names)))
	}
	return explainResult(lines), nil
}
