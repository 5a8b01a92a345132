package budget

import "github.com/dpproxy/dpproxy/conf"

// basicAccountant is sequential composition (Dwork & Roth, "The Algorithmic
// Foundations of Differential Privacy", Thm. 3.16): the ε and δ of every
// charge add up, and a charge is admitted when Σε and Σδ stay within the
// limits.
//
// The sums and the comparison are exact (Numeric, from the numeric text of
// the locked row), as they were when PostgreSQL compared numeric in the
// ledger's UPDATE: 0.1 + 0.2 fits a limit of 0.3, ten charges of 0.1 meet a
// limit of 1 exactly, and 1.0 − 0.7 leaves 0.3.
type basicAccountant struct{}

func (basicAccountant) Name() string { return conf.AccountingBasic }

func (basicAccountant) Compose(t Totals, l Limits, c Charge) (Totals, bool) {
	next := t.plus(c)
	return next, withinBasic(next, l)
}

func (basicAccountant) Report(t Totals, l Limits) Spend { return basicSpend(t, l) }

// withinBasic reports whether Σε and Σδ keep within the limits.
func withinBasic(t Totals, l Limits) bool {
	return t.Epsilon.Cmp(l.Epsilon) <= 0 && t.Delta.Cmp(l.Delta) <= 0
}

// basicSpend is the budget in basic composition's figures, the remaining
// amounts computed exactly (so that 1.0 − 0.7 reads 0.3, not
// 0.30000000000000004), each never negative.
func basicSpend(t Totals, l Limits) Spend {
	return Spend{
		EpsilonSpent:   t.Epsilon.Float64(),
		EpsilonLimit:   l.Epsilon.Float64(),
		DeltaSpent:     t.Delta.Float64(),
		DeltaLimit:     l.Delta.Float64(),
		Accounting:     conf.AccountingBasic,
		Rho:            t.Rho.Float64(),
		DeltaApprox:    t.DeltaApprox.Float64(),
		epsRemaining:   remaining(l.Epsilon, t.Epsilon),
		deltaRemaining: remaining(l.Delta, t.Delta),
		exact:          true,
	}
}

// remaining is max(limit − spent, 0), exact until the final rounding (a
// limit lowered below the spend leaves 0).
func remaining(limit, spent Numeric) float64 {
	d := limit.Sub(spent)
	if d.Cmp(Numeric{}) <= 0 {
		return 0
	}
	return d.Float64()
}
