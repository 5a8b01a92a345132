package budget

import (
	"fmt"

	"github.com/dpproxy/dpproxy/conf"
)

// Accountant decides how an analyst's charges compose: whether one more
// fits the budget, and how the budget reads. The ledger (ledger.go) does
// the I/O around it: it locks the analyst's row in dpproxy.budgets, reads
// the totals and limits, asks Compose, and writes the new totals and the
// charge's record in the same transaction; an accountant does no I/O, so
// each is tested as pure functions (basic_test.go, zcdp_test.go).
//
// One accountant serves every analyst and goroutine of a ledger:
// implementations hold no mutable state (all of it is in Totals).
//
// Each accountant is one file: basic.go, zcdp.go, advanced.go, rdp.go (the
// default). Adding one is a new file, a line in accountants, and its name
// among the values conf accepts for privacy.accounting. Each is a pure
// function of the recorded sequence of releases (release.go): the totals
// are folds of it, recomputed from dpproxy.releases when stale (rdpfold.go).
type Accountant interface {
	// Name is the accounting's name in privacy.accounting (conf.Accounting*).
	Name() string
	// Compose returns the totals after charge c, which validate has
	// accepted, and whether they keep within the limits. A refused charge
	// changes nothing: the ledger writes next only when ok.
	Compose(t Totals, l Limits, c Charge) (next Totals, ok bool)
	// Report is the budget as SHOW dp.budget, the NOTICE, EXPLAIN DP,
	// the metrics and "dpproxy budget" show it.
	Report(t Totals, l Limits) Spend
}

// accountants lists every accounting privacy.accounting can name.
func accountants() []Accountant { return accountantsWith(Options{}) }

// accountantsWith is accountants with the parameters opts gives.
func accountantsWith(opts Options) []Accountant {
	dPrime := opts.AdvancedDelta
	if dPrime == 0 {
		dPrime = conf.DefaultAdvancedDelta
	}
	share := opts.RDPDeltaShare
	if share == 0 {
		share = conf.DefaultRDPDeltaShare
	}
	return []Accountant{basicAccountant{}, zcdpAccountant{share: share}, advancedAccountant{deltaPrime: dPrime}, rdpAccountant{share: share}}
}

// NewAccountant returns the accountant privacy.accounting names; "" is
// the default, RDP accounting (conf.DefaultAccounting). Accountants with a parameter
// (advanced: δ′) take its default; see NewAccountantWith.
func NewAccountant(name string) (Accountant, error) {
	return NewAccountantWith(Options{Accounting: name})
}

// NewAccountantWith returns the accountant opts.Accounting names, with the
// parameters opts gives (Options.AdvancedDelta).
func NewAccountantWith(opts Options) (Accountant, error) {
	name := opts.Accounting
	if name == "" {
		name = conf.DefaultAccounting
	}
	if d := opts.AdvancedDelta; d != 0 && !(d > 0 && d < 1) {
		return nil, fmt.Errorf("budget: advanced δ′ must lie in (0, 1), got %v", d)
	}
	if s := opts.RDPDeltaShare; s != 0 && !(s > 0 && s < 1) {
		return nil, fmt.Errorf("budget: rdp δ share must lie in (0, 1), got %v", s)
	}
	for _, a := range accountantsWith(opts) {
		if a.Name() == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("budget: unknown accounting %q", name)
}

// Totals are an analyst's running sums, as the columns of dpproxy.budgets
// hold them. Every accountant adds each charge to all of them (plus),
// whichever it decides on, so that a ledger switched to another accounting
// later has the sums that one needs.
//
// An accountant that needs state of its own adds it here, with a column of
// dpproxy.budgets (schema.go) that is a fold of dpproxy.releases: the Rényi
// accountant's per-order sums (RDP, rdp_spent) are one.
type Totals struct {
	// Epsilon and Delta are Σε and Σδ (epsilon_spent, delta_spent).
	Epsilon, Delta Numeric
	// Rho and DeltaApprox are the zCDP totals Σρ and Σδ of the approximate
	// parts (rho_spent, delta_approx_spent); see Charge.zcdpPart.
	Rho, DeltaApprox Numeric
	// EpsilonSq is Σε² (epsilon_sq_spent), exact: the advanced
	// accountant's filter (advanced.go). Rows that predate the column get
	// it recomputed from dpproxy.charges (schema.go, migrateEpsilonSq).
	EpsilonSq Numeric
	// RDP is the Rényi accountant's sums over the grid (rdp.go): one per
	// order of rdpOrders, then the ∞ order (rdp_spent). The ledger
	// recomputes it from dpproxy.releases when the stored sums are
	// missing or stale (rdpfold.go); nil reads as zeros.
	RDP []float64
}

// Limits are an analyst's budget: the configured (ε, δ) plus what operators
// granted (epsilon_limit, delta_limit).
type Limits struct {
	Epsilon, Delta Numeric
}

// plus returns t with c added to every total, exactly: the decimal text
// the ledger records for c in dpproxy.charges, added as numeric.
func (t Totals) plus(c Charge) Totals {
	rho, dApprox := c.zcdpPart()
	eps := numericOf(c.Epsilon)
	return Totals{
		EpsilonSq:   t.EpsilonSq.Add(eps.Mul(eps)),
		Epsilon:     t.Epsilon.Add(numericOf(c.Epsilon)),
		Delta:       t.Delta.Add(numericOf(c.Delta)),
		Rho:         t.Rho.Add(numericOf(rho)),
		DeltaApprox: t.DeltaApprox.Add(numericOf(dApprox)),
		RDP:         plusRDP(t.rdp(), c.releases()),
	}
}
