package budget

import (
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

// limitsOf is a budget of (eps, delta) written as numeric text.
func limitsOf(t *testing.T, eps, delta string) Limits {
	t.Helper()
	return Limits{Epsilon: mustNumeric(t, eps), Delta: mustNumeric(t, delta)}
}

// composeAll charges c through a until it refuses and returns how many
// charges fit and the totals after the last one admitted.
func composeAll(t *testing.T, a Accountant, l Limits, c Charge) (int, Totals) {
	t.Helper()
	var tot Totals
	for n := 0; n < 10000; n++ {
		next, ok := a.Compose(tot, l, c)
		if !ok {
			return n, tot
		}
		tot = next
	}
	t.Fatal("the accountant never refused")
	return 0, Totals{}
}

func TestAccountantRegistry(t *testing.T) {
	for name, want := range map[string]string{"": conf.AccountingRDP, conf.AccountingBasic: conf.AccountingBasic, conf.AccountingZCDP: conf.AccountingZCDP, conf.AccountingRDP: conf.AccountingRDP} {
		a, err := NewAccountant(name)
		if err != nil || a.Name() != want {
			t.Errorf("NewAccountant(%q) = %v, %v; want %s", name, a, err, want)
		}
	}
	if a, err := NewAccountant("rdp-someday"); err == nil {
		t.Errorf("NewAccountant(unknown) = %v, want an error", a)
	}
	seen := map[string]bool{}
	for _, a := range accountants() {
		if seen[a.Name()] {
			t.Errorf("two accountants named %q", a.Name())
		}
		seen[a.Name()] = true
	}
}

// TestBasicExact: sums and comparisons are exact decimals, so 0.1 + 0.2
// fits a limit of 0.3 and ten charges of 0.1 meet a limit of 1.
func TestBasicExact(t *testing.T) {
	a := basicAccountant{}
	l := limitsOf(t, "0.3", "0")
	tot, ok := a.Compose(Totals{}, l, Charge{Epsilon: 0.1})
	if !ok {
		t.Fatal("0.1 against 0.3 refused")
	}
	if tot, ok = a.Compose(tot, l, Charge{Epsilon: 0.2}); !ok {
		t.Fatal("0.1 + 0.2 against 0.3 refused")
	}
	if s := a.Report(tot, l); s.EpsilonRemaining() != 0 || s.EpsilonSpent != 0.3 {
		t.Errorf("after 0.1 + 0.2 of 0.3: %+v, remaining %v", s, s.EpsilonRemaining())
	}
	if _, ok := a.Compose(tot, l, Charge{Epsilon: 1e-12}); ok {
		t.Error("a charge beyond an exactly spent budget fits")
	}

	n, tot := composeAll(t, a, limitsOf(t, "1", "0"), Charge{Epsilon: 0.1})
	if n != 10 || tot.Epsilon.String() != "1.0" {
		t.Errorf("charges of 0.1 within 1: %d fit, total %s; want 10, 1.0", n, tot.Epsilon)
	}
}

// TestBasicDelta: δ adds up like ε, and a charge must keep both.
func TestBasicDelta(t *testing.T) {
	a := basicAccountant{}
	l := limitsOf(t, "100", "0.000001")
	if n, tot := composeAll(t, a, l, Charge{Epsilon: 1, Delta: 3e-7}); n != 3 || tot.Delta.String() != "0.0000009" {
		t.Errorf("charges of δ=3e-7 within 1e-6: %d fit, Σδ = %s; want 3, 0.0000009", n, tot.Delta)
	}
	if _, ok := a.Compose(Totals{}, l, Charge{Epsilon: 1, Delta: 1e-6}); !ok {
		t.Error("a charge of exactly the δ limit refused")
	}
	if _, ok := a.Compose(Totals{}, l, Charge{Epsilon: 1, Delta: 1.0000001e-6}); ok {
		t.Error("a charge over the δ limit fits")
	}
	if _, ok := a.Compose(Totals{}, l, Charge{Epsilon: 100.0000001}); ok {
		t.Error("a charge over the ε limit fits")
	}
}

// TestBasicRecordsZCDP: basic accounting adds the zCDP cost too, so that a
// ledger switched to zCDP later has its totals.
func TestBasicRecordsZCDP(t *testing.T) {
	a := basicAccountant{}
	l := limitsOf(t, "10", "0.001")
	tot, _ := a.Compose(Totals{}, l, Charge{Epsilon: 0.4, Delta: 1e-7})
	tot, _ = a.Compose(tot, l, Charge{Epsilon: 0.5, Delta: 1e-8, Rho: 0.01, DeltaApprox: 1e-9})
	wantRho := mustNumeric(t, decimal(PureRho(0.4))).Add(mustNumeric(t, "0.01"))
	if tot.Rho.Cmp(wantRho) != 0 || tot.DeltaApprox.String() != "0.000000101" {
		t.Errorf("zCDP totals = ρ %s, δ approx %s; want %s, 0.000000101", tot.Rho, tot.DeltaApprox, wantRho)
	}
	if s := a.Report(tot, l); s.Accounting != conf.AccountingBasic || s.EpsilonSpent != 0.9 || s.Rho != wantRho.Float64() {
		t.Errorf("Report = %+v", s)
	}
}

// TestBasicReport: the remaining amounts are exact and never negative.
func TestBasicReport(t *testing.T) {
	a := basicAccountant{}
	tot := Totals{Epsilon: mustNumeric(t, "0.7"), Delta: mustNumeric(t, "1e-07")}
	s := a.Report(tot, limitsOf(t, "1.0", "0.000001"))
	if s.EpsilonRemaining() != 0.3 || s.DeltaRemaining() != 9e-7 || s.EpsilonSpent != 0.7 || s.EpsilonLimit != 1 || s.DeltaSpent != 1e-7 {
		t.Errorf("Report = %+v, remaining %v, %v; want 0.3, 9e-07", s, s.EpsilonRemaining(), s.DeltaRemaining())
	}
	// A limit lowered below the spend leaves 0.
	s = a.Report(Totals{Epsilon: mustNumeric(t, "0.4")}, limitsOf(t, "0.3", "0"))
	if s.EpsilonRemaining() != 0 || math.Signbit(s.EpsilonRemaining()) || s.DeltaRemaining() != 0 {
		t.Errorf("over-spent Report = %+v, remaining %v", s, s.EpsilonRemaining())
	}
}
