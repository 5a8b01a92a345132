package proxy

import (
	"context"
	"time"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// A private query over a column with bounds: auto (rewrite.Plan.Auto,
// rewrite/autobounds.go, dp/approxbounds.go) takes privateResult's steps
// with two queries after the one charge:
//
//	analyse → spec (dp.AutoSpec: the bounds part at
//	privacy.auto_bounds_share of ε, the main query at the rest, checked
//	with the widest bounds; both queries planned by the database before
//	the charge) → claim and charge the whole ε once → run the histogram
//	query bounded → noise it, choose the bounds (dp) → analyse the
//	statement again with them (rewrite: same plan, their clamp) → run the
//	main query bounded → release → store → send.
//
// The histogram query always returns 129 rows and computes only total
// expressions, so neither its errors nor its size depend on anyone's
// rows; its timing falls in the same response slot as the rest. The
// chosen bounds are a DP release (post-processing of the noisy counts),
// so the NOTICE states them.

// autoSpec is the spec of a plan with bounds: auto (dp.NewAutoSpec).
func (ss *session) autoSpec(plan *rewrite.Plan) (*dp.AutoSpec, error) {
	p, err := dp.NewPrivacy(ss.mechanism, ss.epsilon, ss.delta)
	if err != nil {
		return nil, err
	}
	share := ss.srv.cfg.AutoBoundsShareOf(plan.Table.Columns[plan.Auto.Column])
	return dp.NewAutoSpec(plan, p.WithSampler(ss.srv.sampler), share, ss.srv.sampler(noise.Laplace()))
}

// autoHistogramPlan is plan with the histogram query as its SQL, to plan
// it before the charge and run it after (checkAnswerable, runBounded).
func autoHistogramPlan(plan *rewrite.Plan) *rewrite.Plan {
	h := *plan
	h.SQL = plan.Auto.SQL
	h.Post = nil
	return &h
}

// autoResult answers a private query with a bounds: auto column, in the
// steps of privateResult (see the top of this file).
func (ss *session) autoResult(ctx context.Context, st *rewrite.Statement, p *params, paramOIDs []uint32) (*result, error) {
	clk := ss.startClock()
	defer ss.stopClock(clk)
	defer clk.release(ctx)

	// Analyse: the parameters, the constants, the question's key.
	plan, cv, key, err := ss.analyseQuestion(ctx, st, p, paramOIDs) // private.go
	if err != nil {
		return nil, err
	}
	if r, ok := ss.cachedAnswer(ctx, clk, key); ok {
		return r, nil
	}

	// Spec: both parts, and every check that reads no private row, for
	// both queries, before anything is charged.
	desc, err := ss.describe(ctx, plan, paramOIDs)
	if err != nil {
		return nil, err
	}
	spec, err := ss.autoSpec(plan)
	if err != nil {
		return nil, err
	}
	if err := ss.checkPost(ctx, plan); err != nil {
		return nil, err
	}
	if err := ss.checkAnswerable(ctx, plan, p, desc.paramOIDs, cv); err != nil {
		return nil, err
	}
	hplan := autoHistogramPlan(plan)
	if err := ss.checkAnswerable(ctx, hplan, p, desc.paramOIDs, cv); err != nil {
		return nil, err
	}

	// Claim, then charge the whole ε once (dp.AutoSpec.Cost), before the
	// first query reads a row.
	claim, cached, err := ss.claimAnswer(ctx, key)
	if err != nil {
		return nil, err
	}
	defer claim.Release()
	defer clk.release(ctx)
	if cached != nil {
		ss.cacheHit(ctx)
		return ss.answerResult(cached, true, budget.Spend{}), nil
	}
	if err := clk.check(); err != nil {
		return nil, err
	}
	c, err := spec.Cost()
	if err != nil {
		return nil, err
	}
	charge := budget.Charge{Analyst: ss.user.Name, Epsilon: c.Epsilon, Delta: c.Delta,
		Rho: c.Rho, DeltaApprox: c.DeltaApprox, Releases: c.Releases, Fingerprint: st.Fingerprint,
		Tables: planTables(st.Plan)}
	spend, err := ss.chargeLedger(ctx, claim, charge)
	if err != nil {
		return nil, err
	}

	// The histogram, bounded; its noisy counts choose the bounds.
	var hrows [][][]byte
	err = clk.run(ctx, func(ctx context.Context) error {
		hrows, err = ss.runBounded(ctx, hplan, p, desc.paramOIDs, cv)
		return err
	})
	if err != nil {
		return nil, err
	}
	hist, err := dp.ParseAutoHistogram(hrows)
	if err != nil {
		return nil, err
	}
	chosen, err := spec.Bounds.Choose(hist)
	if err != nil {
		return nil, err
	}

	// The statement analysed again with the chosen bounds; the main
	// query's spec with them.
	cplan, err := ss.autoChosenPlan(st, plan, chosen)
	if err != nil {
		return nil, err
	}
	mspec, err := spec.Chosen(cplan)
	if err != nil {
		return nil, err
	}

	// The main query, bounded, released, post-processed.
	var rows [][][]byte
	err = clk.run(ctx, func(ctx context.Context) error {
		rows, err = ss.runBounded(ctx, cplan, p, desc.paramOIDs, cv)
		return err
	})
	if err != nil {
		return nil, err
	}
	a, err := release(cplan, mspec, desc.fields, rows)
	if err != nil {
		return nil, err
	}
	if cplan.Post != nil {
		if a, err = ss.postProcess(ctx, cplan, a); err != nil {
			return nil, err
		}
	}
	a.charged.Epsilon += spec.Bounds.Epsilon()
	if a.detail != "" {
		a.detail += "\n"
	}
	a.detail += spec.Bounds.Detail(chosen)

	a.notBefore = clk.slotEnd(time.Now())
	if err := ss.storeAnswer(ctx, claim, key, a); err != nil {
		return nil, err
	}
	return withBudgetDetail(ss.answerResult(a, false, spend), spend, claim), nil // tables.go
}

// autoChosenPlan is plan answered with the chosen bounds: the statement
// analysed again by the server's analyzer with them
// (rewrite.Analyzer.WithAutoBounds), grafted onto plan
// (rewrite.Plan.WithAutoBounds), which keeps what the proxy filled in.
// It fails only on a bug: the statement was analysed before.
func (ss *session) autoChosenPlan(st *rewrite.Statement, plan *rewrite.Plan, chosen dp.AutoResult) (*rewrite.Plan, error) {
	an := ss.srv.analyzer.WithAutoBounds(map[string][2]float64{plan.Auto.Key: {chosen.Lower, chosen.Upper}})
	sts, err := an.Analyze(st.SQL)
	if err != nil || len(sts) != 1 || sts[0].Plan == nil {
		return nil, fail(pgerr.InternalError, "the statement could not be analysed again with its chosen bounds: %v", err)
	}
	return plan.WithAutoBounds(sts[0].Plan)
}

// explainAuto is EXPLAIN DP of a plan with bounds: auto: the whole
// charge, the bounds part, the main query as EXPLAIN DP shows any, and
// the histogram query. It reads no table data and charges nothing.
func (ss *session) explainAuto(ctx context.Context, plan *rewrite.Plan, paramOIDs []uint32) (*result, error) {
	desc, err := ss.describe(ctx, plan, paramOIDs)
	if err != nil {
		return nil, err
	}
	spec, err := ss.autoSpec(plan)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(desc.fields))
	for i, f := range desc.fields {
		names[i] = string(f.Name)
	}
	lines := spec.Explain(names, ss.budgetLeft(ctx))
	if cost, err := spec.Cost(); err == nil { // tables.go: the budgets and how many queries fit
		lines = ss.explainWithBudgets(ctx, plan, cost, lines, spec.Explain(names, nil), len(spec.ExplainSpec(names)))
	}
	return explainResult(lines), nil
}
