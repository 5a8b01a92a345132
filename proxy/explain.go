package proxy

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
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
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }

	add("DP query over %s, privacy unit %s, mechanism %s", plan.Table.QualifiedName(), plan.Table.PrivacyUnit, spec.mech.Name())
	add("Contribution bounds: at most %d rows per unit per group, at most %d group(s) per unit", plan.MaxRows, plan.MaxGroups)
	shares := len(plan.Aggregates)
	if plan.PartitionSelection {
		shares++
	}
	split := fmt.Sprintf("ε split in %d equal share(s): %d aggregate(s)", shares, len(plan.Aggregates))
	if plan.PartitionSelection {
		split += " and partition selection"
	}
	add("Charge: ε=%s δ=%s (of the session's ε=%s δ=%s; %s)", formatNum(spec.total.Epsilon), formatNum(spec.total.Delta),
		formatNum(ss.epsilon), formatNum(ss.delta), split)

	for i, o := range plan.Outputs {
		name := string(fields[i].Name)
		if o.Agg == nil {
			k := plan.GroupKeys[o.GroupKey]
			if len(k.PublicValues) > 0 {
				add("Column %s: group key with public values: all %d are released, even with a count near zero", name, len(k.PublicValues))
			} else {
				add("Column %s: group key read from the private table: a value is released only through partition selection", name)
			}
			continue
		}
		as := spec.aggs[aggIndex(plan, o.Agg)]
		if o.Agg.Kind == rewrite.AggQuantile && as.quantile != nil {
			q := as.quantile
			add("Column %s (%s): exponential mechanism over %d buckets of width %s in [%s, %s], ε=%s per group (L0=%d), utility sensitivity %s",
				name, o.Agg.Func, o.Agg.Buckets, humanBound((o.Agg.Upper-o.Agg.Lower)/float64(o.Agg.Buckets)),
				formatNum(o.Agg.Lower), formatNum(o.Agg.Upper), formatNum(q.eps), q.l0, formatNum(q.sensitivity))
			continue
		}
		centred := o.Agg.Kind == rewrite.AggAvg || o.Agg.Kind == rewrite.AggVariance
		parts := []struct {
			what string
			p    part
		}{{"count", as.count}, {"sum", as.sum}, {"sum of squares", as.sq}}
		if centred {
			parts[1].what = "centred sum"
		}
		for _, p := range parts {
			if p.p.bound.L0 == 0 {
				continue
			}
			label := o.Agg.Func
			if centred {
				label += ", " + p.what + " part"
			}
			add("Column %s (%s): %s", name, label, describePart(spec.mech, p.p))
		}
		if o.Agg.Kind == rewrite.AggAvg {
			add("Column %s: released as the middle of the bounds plus noisy centred sum / noisy count, clamped to [%s, %s]; its error is about ±%s / n for a group of n rows",
				name, formatNum(o.Agg.Lower), formatNum(o.Agg.Upper), humanBound(as.sum.errorBound(spec.mech)))
		}
	}
	if plan.PartitionSelection {
		add("Partition selection: a group is released when its noisy count of distinct units (L0=%d L∞=1, ε=%s δ=%s) reaches %s",
			spec.sel.bound.L0, formatNum(spec.sel.share.Epsilon), formatNum(spec.selDelta), humanBound(spec.threshold))
	}
	if sp, err := ss.srv.ledger.Spent(ctx, ss.user.Name); err == nil && ss.srv.cfg.Privacy.Accounting == conf.AccountingZCDP {
		// Under zCDP the ε a query adds depends on what was spent before
		// (the conversion is not additive): plain subtraction could
		// overstate what is left, so say only what is known.
		add("Budget now (zCDP accounting): ε=%s δ=%s left; this query adds ρ to the ledger's zCDP total and its ε cost after conversion is known once it runs (SHOW dp.budget)",
			formatNum(sp.EpsilonRemaining()), formatNum(sp.DeltaRemaining()))
	} else if err == nil {
		add("Budget left after this query: ε=%s δ=%s (now ε=%s δ=%s)",
			formatNum(math.Max(0, sp.EpsilonRemaining()-spec.total.Epsilon)), formatNum(math.Max(0, sp.DeltaRemaining()-spec.total.Delta)),
			formatNum(sp.EpsilonRemaining()), formatNum(sp.DeltaRemaining()))
		if sp.EpsilonRemaining() < spec.total.Epsilon || sp.DeltaRemaining() < spec.total.Delta {
			add("Budget: this query would be refused (53400): it costs more than is left")
		}
	}
	if pp := plan.Post; pp != nil {
		add("Post-processing over the noisy rows dp(dp_c0, ...): SELECT %s%s%s", pp.Targets,
			map[bool]string{true: " WHERE " + pp.Where}[pp.Where != ""], map[bool]string{true: " ORDER BY " + pp.OrderBy}[pp.OrderBy != ""])
	}
	if len(plan.Consts) > 0 {
		// Constants first (rewrite/hoist.go): evaluated before the charge.
		add("Constants evaluated before any private row is read, nothing charged if they fail:")
		for _, c := range plan.Consts {
			if c.Param == 0 {
				add("  %s (checked, stays inline)", c.SQL)
			} else {
				add("  $%d = %s", c.Param, c.SQL)
			}
		}
	}
	add("Rewritten SQL ($%d is a fresh secret seed per execution):", plan.SeedParam())
	lines = append(lines, strings.Split(plan.SQL, "\n")...)
	rows := make([][]string, len(lines))
	for i, l := range lines {
		rows[i] = []string{l}
	}
	return textResult([]string{"QUERY PLAN"}, []uint32{oidText}, rows, "EXPLAIN"), nil
}

// describePart words one noised quantity: mechanism, sensitivity, share,
// noise scale and 95% error bound.
func describePart(m noise.Mechanism, p part) string {
	if p.bound.LInf == 0 {
		return fmt.Sprintf("sensitivity 0 (lower = upper): exact, no noise, ε=%s", formatNum(p.share.Epsilon))
	}
	sd, _ := m.StdDev(p.bound.L0, p.bound.LInf, p.share.Epsilon, p.share.Delta)
	scale := fmt.Sprintf("noise σ %s", humanBound(sd))
	if m.Name() == "laplace" {
		// Laplace's standard deviation is √2 times its scale b = L1/ε.
		scale = fmt.Sprintf("noise scale b=%s (std dev %s)", humanBound(sd/math.Sqrt2), humanBound(sd))
	}
	return fmt.Sprintf("%s, sensitivity L0=%d L∞=%s, ε=%s δ=%s, %s, 95%% error ±%s",
		m.Name(), p.bound.L0, formatNum(p.bound.LInf), formatNum(p.share.Epsilon), formatNum(p.share.Delta), scale, humanBound(p.errorBound(m)))
}

// humanBound prints a non-negative amount for a person: three significant
// digits, no exponent ("288", "144000", "0.0312").
func humanBound(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// noticeText is the NOTICE after a noisy answer: each noisy column's 95%
// error bound, worded for a person, then the charge and what is left.
func noticeText(bounds string, cached bool, eps, delta, epsLeft, deltaLeft float64) string {
	if cached {
		return fmt.Sprintf("dp: %s; repeated query: the earlier noisy answer, nothing charged", bounds)
	}
	return fmt.Sprintf("dp: %s; charged ε=%s δ=%s, remaining ε=%s δ=%s", bounds,
		formatNum(eps), formatNum(delta), formatNum(epsLeft), formatNum(deltaLeft))
}
