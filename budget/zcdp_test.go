package budget

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

func TestZCDPClosedForms(t *testing.T) {
	e := math.E
	for _, tc := range []struct {
		rho, delta, want float64
	}{
		{1, 1 / e, 3},                                   // 1 + 2·√(1·1)
		{0.25, math.Pow(e, -4), 2.25},                   // 0.25 + 2·√(0.25·4)
		{0.5, 1e-6, 0.5 + 2*math.Sqrt(0.5*6*math.Ln10)}, // ln(1e6) = 6 ln 10
		{0, 1e-9, 0},
		{0.1, 1, math.Inf(1)},
		{0.1, 0, math.Inf(1)},
		{math.NaN(), 0.1, math.Inf(1)},
		{-1, 0.1, math.Inf(1)},
	} {
		if got := ZCDPEpsilon(tc.rho, tc.delta); !(math.Abs(got-tc.want) <= 1e-12*math.Max(1, tc.want)) && got != tc.want {
			t.Errorf("ZCDPEpsilon(%v, %v) = %v, want %v", tc.rho, tc.delta, got, tc.want)
		}
	}
	for _, tc := range []struct{ l2, sigma, want float64 }{
		{1, 1, 0.5}, {2, 1, 2}, {3, 3, 0.5}, {8, 40, 0.02},
	} {
		if got := GaussianRho(tc.l2, tc.sigma); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("GaussianRho(%v, %v) = %v, want %v", tc.l2, tc.sigma, got, tc.want)
		}
	}
	for eps, want := range map[float64]float64{1: 0.5, 0.2: 0.02, 2: 2} {
		if got := PureRho(eps); math.Abs(got-want) > 1e-15 {
			t.Errorf("PureRho(%v) = %v, want %v", eps, got, want)
		}
	}
	// A charge without ρ costs ε²/2 and its δ.
	if r, d := (Charge{Epsilon: 0.4, Delta: 1e-7}).zcdpPart(); r != PureRho(0.4) || d != 1e-7 {
		t.Errorf("zcdpPart of a plain (ε, δ) charge = %v, %v", r, d)
	}
	if r, d := (Charge{Epsilon: 0.4, Delta: 1e-7, Rho: 0.003, DeltaApprox: 5e-8}).zcdpPart(); r != 0.003 || d != 5e-8 {
		t.Errorf("zcdpPart of a charge with ρ = %v, %v", r, d)
	}
}

func TestSpendInZCDP(t *testing.T) {
	// Basic would be over the limit, zCDP is not: report zCDP.
	s := Spend{EpsilonSpent: 7, EpsilonLimit: 5, DeltaSpent: 1e-8, DeltaLimit: 1e-6, Rho: 0.2, DeltaApprox: 0}
	s.inZCDP()
	want := ZCDPEpsilon(0.2, 1e-6)
	if s.Accounting != conf.AccountingZCDP || s.EpsilonSpent != want || s.DeltaSpent != 0 || s.DeltaRemaining() != 1e-6 {
		t.Errorf("inZCDP = %+v, want zcdp with ε spent %v", s, want)
	}
	if math.Abs(s.EpsilonRemaining()-(5-want)) > 1e-12 {
		t.Errorf("remaining = %v, want %v", s.EpsilonRemaining(), 5-want)
	}
	// Basic is tighter: keep it.
	s = Spend{EpsilonSpent: 0.5, EpsilonLimit: 5, DeltaLimit: 1e-6, Rho: 0.125, Accounting: conf.AccountingBasic}
	s.inZCDP()
	if s.Accounting != conf.AccountingBasic || s.EpsilonSpent != 0.5 {
		t.Errorf("inZCDP with basic tighter = %+v", s)
	}
	// No δ left for the conversion: basic stays.
	s = Spend{EpsilonSpent: 0.5, EpsilonLimit: 5, DeltaLimit: 1e-6, DeltaSpent: 1e-6, DeltaApprox: 1e-6, Rho: 0.0001, Accounting: conf.AccountingBasic}
	s.inZCDP()
	if s.Accounting != conf.AccountingBasic {
		t.Errorf("inZCDP without δ for the conversion = %+v", s)
	}
}

func openZCDP(t *testing.T, eps, delta float64) (*Ledger, func(Charge) error) {
	t.Helper()
	pool := newPool(t, newDB(t), 4, nil)
	l, err := Open(context.Background(), pool, users("zed", eps, delta), Options{Accounting: conf.AccountingZCDP})
	if err != nil {
		t.Fatal(err)
	}
	return l, func(c Charge) error {
		c.Analyst = "zed"
		_, err := l.Charge(context.Background(), c)
		return err
	}
}

// admitted charges c until the ledger refuses and returns how many it took.
func admitted(t *testing.T, charge func(Charge) error, c Charge) int {
	t.Helper()
	for n := 0; n < 1000; n++ {
		err := charge(c)
		var ex *ExhaustedError
		if errors.As(err, &ex) {
			return n
		}
		if err != nil {
			t.Fatalf("charge %d: %v", n+1, err)
		}
	}
	t.Fatal("the ledger never refused")
	return 0
}

// TestZCDPAdmitsWhatTheConversionAllows: Gaussian-like charges of ε=0.5,
// ρ=0.01 against a budget of (5, 1e-6). Basic composition stops at 10;
// zCDP admits n while n·ρ + 2√(n·ρ·ln(1/δ)) <= 5, i.e. 38.
func TestZCDPAdmitsWhatTheConversionAllows(t *testing.T) {
	t.Parallel()
	c := Charge{Epsilon: 0.5, Delta: 1e-8, Rho: 0.01, Fingerprint: "g"}
	want := 0
	for ZCDPEpsilon(float64(want+1)*c.Rho, 1e-6) <= 5 {
		want++
	}
	if want != 38 {
		t.Fatalf("closed form: %d charges fit, want 38", want)
	}
	l, charge := openZCDP(t, 5, 1e-6)
	if got := admitted(t, charge, c); got != want {
		t.Errorf("zCDP ledger admitted %d charges, want %d", got, want)
	}
	s, err := l.Spent(context.Background(), "zed")
	if err != nil {
		t.Fatal(err)
	}
	if s.Accounting != conf.AccountingZCDP || math.Abs(s.EpsilonSpent-ZCDPEpsilon(0.38, 1e-6)) > 1e-9 || s.DeltaSpent != 0 {
		t.Errorf("Spent = %+v, want zcdp ε %v, δ 0", s, ZCDPEpsilon(0.38, 1e-6))
	}

	// The same charges under basic accounting stop at 10.
	pool := newPool(t, newDB(t), 2, nil)
	lb := mustOpen(t, pool, users("zed", 5.0, 1e-6))
	if got := admitted(t, func(c Charge) error {
		c.Analyst = "zed"
		_, err := lb.Charge(context.Background(), c)
		return err
	}, c); got != 10 {
		t.Errorf("basic ledger admitted %d charges, want 10", got)
	}
}

// TestZCDPNeverWorseThanBasic: charges where zCDP is looser than basic
// (one large pure-ε charge each) are still admitted by basic composition.
func TestZCDPNeverWorseThanBasic(t *testing.T) {
	t.Parallel()
	_, charge := openZCDP(t, 3, 1e-6)
	// ρ = 0.5 per charge: zCDP alone would allow only 0 (0.5 + 2√(0.5·13.8) > 3).
	if got := admitted(t, charge, Charge{Epsilon: 1, Fingerprint: "l"}); got != 3 {
		t.Errorf("admitted %d, want 3 (basic composition)", got)
	}
}

// TestZCDPApproximateDelta: the δ of the approximate part (partition
// selection) adds up and must stay below the δ limit, leaving some δ for the
// conversion. Charges of δ = 4e-7 (all of it, as basic composition counts)
// of which 1e-7 is the approximate part: basic admits 2 against δ = 1e-6,
// zCDP admits 9 (a tenth would leave δ' = 0 for the conversion).
func TestZCDPApproximateDelta(t *testing.T) {
	t.Parallel()
	_, charge := openZCDP(t, 100, 1e-6)
	c := Charge{Epsilon: 1, Delta: 4e-7, Rho: 0.001, DeltaApprox: 1e-7, Fingerprint: "p"}
	if got := admitted(t, charge, c); got != 9 {
		t.Errorf("admitted %d charges, want 9", got)
	}
}
