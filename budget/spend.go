package budget

import "math"

// Spend is an analyst's budget at one moment, in the figures of the
// ledger's accountant (Accountant.Report).
type Spend struct {
	EpsilonSpent, EpsilonLimit float64
	DeltaSpent, DeltaLimit     float64
	// Accounting is the ledger's accounting, whose figures these are:
	// basic (Σε, Σδ); zcdp (zcdp.go: EpsilonSpent is the smaller of the
	// conversion of Σρ at δ_z and, while every charge is pure, Σε;
	// DeltaSpent is DeltaApprox + δ_z); advanced (advanced.go: the
	// smaller of Σε and the filter's bound, DeltaSpent including δ′); rdp
	// (rdp.go: the smallest ε any order certifies, DeltaSpent including
	// δ_c).
	Accounting string
	// Rho and DeltaApprox are the zCDP totals, kept under either accounting.
	Rho, DeltaApprox float64

	// Remaining amounts computed exactly (Numeric) by the accountant; used
	// when exact is set, so that 1.0 - 0.7 reads 0.3.
	epsRemaining, deltaRemaining float64
	exact                        bool
}

// EpsilonRemaining is the ε still available, never negative (a limit
// lowered below the spend leaves 0).
func (s Spend) EpsilonRemaining() float64 {
	if s.exact {
		return s.epsRemaining
	}
	return math.Max(0, s.EpsilonLimit-s.EpsilonSpent)
}

// DeltaRemaining is the δ still available, never negative.
func (s Spend) DeltaRemaining() float64 {
	if s.exact {
		return s.deltaRemaining
	}
	return math.Max(0, s.DeltaLimit-s.DeltaSpent)
}
