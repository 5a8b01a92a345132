package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
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

// TestZCDPAccountantCompose: the zCDP accountant's decision as a pure
// function, with the figures of the ledger tests above.
func TestZCDPAccountantCompose(t *testing.T) {
	a := zcdpAccountant{}
	// Gaussian-like charges: basic stops at 10, the conversion at 38.
	g := Charge{Epsilon: 0.5, Delta: 1e-8, Rho: 0.01}
	if n, tot := composeAll(t, a, limitsOf(t, "5", "0.000001"), g); n != 38 || tot.Rho.String() != "0.38" {
		t.Errorf("zCDP admitted %d Gaussian-like charges (ρ total %s), want 38 (0.38)", n, tot.Rho)
	}
	if n, _ := composeAll(t, basicAccountant{}, limitsOf(t, "5", "0.000001"), g); n != 10 {
		t.Errorf("basic admitted %d Gaussian-like charges, want 10", n)
	}
	// Pure charges where zCDP alone admits none: basic still admits 3.
	if n, _ := composeAll(t, a, limitsOf(t, "3", "0.000001"), Charge{Epsilon: 1}); n != 3 {
		t.Errorf("zCDP admitted %d charges of ε=1 within 3, want 3 (basic composition)", n)
	}
	// The approximate δ must leave some δ for the conversion: 9, not 10.
	if n, _ := composeAll(t, a, limitsOf(t, "100", "0.000001"), Charge{Epsilon: 1, Delta: 4e-7, Rho: 0.001, DeltaApprox: 1e-7}); n != 9 {
		t.Errorf("zCDP admitted %d charges with approximate δ=1e-7 of 1e-6, want 9", n)
	}
}

// TestWithinZCDPGuard: with no δ left for the conversion (δ' <= 0) nothing
// fits by zCDP, however small ρ; with δ' > 0 the conversion decides.
func TestWithinZCDPGuard(t *testing.T) {
	l := limitsOf(t, "100", "0.000001")
	for _, dApprox := range []string{"0.000001", "0.0000011"} {
		tot := Totals{Rho: mustNumeric(t, "0.0001"), DeltaApprox: mustNumeric(t, dApprox)}
		if withinZCDP(tot, l) {
			t.Errorf("withinZCDP with approximate δ %s of the limit 1e-6 = true", dApprox)
		}
	}
	tot := Totals{Rho: mustNumeric(t, "0.0001"), DeltaApprox: mustNumeric(t, "0.0000009")}
	if !withinZCDP(tot, l) {
		t.Error("withinZCDP with δ' = 1e-7 and a tiny ρ = false")
	}
	// The boundary: ρ = 1 converts to exactly 3 at δ' = 1/e.
	rho := Totals{Rho: mustNumeric(t, "1")}
	if lim := (Limits{Epsilon: numericOf(ZCDPEpsilon(1, 1/math.E)), Delta: numericOf(1 / math.E)}); !withinZCDP(rho, lim) {
		t.Error("withinZCDP at exactly the converted ε = false")
	}
}

// TestZCDPAccountantReport: Report is basic's figures switched to zCDP
// when that is the tighter bound (inZCDP).
func TestZCDPAccountantReport(t *testing.T) {
	tot := Totals{Epsilon: mustNumeric(t, "7"), Delta: mustNumeric(t, "1e-08"), Rho: mustNumeric(t, "0.2")}
	s := zcdpAccountant{}.Report(tot, limitsOf(t, "5", "0.000001"))
	if s.Accounting != conf.AccountingZCDP || s.EpsilonSpent != ZCDPEpsilon(0.2, 1e-6) || s.DeltaSpent != 0 || s.DeltaRemaining() != 1e-6 {
		t.Errorf("Report = %+v", s)
	}
	tot = Totals{Epsilon: mustNumeric(t, "0.7"), Rho: mustNumeric(t, "0.245")}
	if s := (zcdpAccountant{}).Report(tot, limitsOf(t, "1.0", "0.000001")); s != basicSpend(tot, limitsOf(t, "1.0", "0.000001")) || s.EpsilonRemaining() != 0.3 {
		t.Errorf("Report with basic tighter = %+v, want basic's exact figures", s)
	}
}

// TestZCDPConcurrentChargesNeverOverspend: concurrent charges, each worker
// with a pool of its own (as if separate proxies), serialize on the
// analyst's row lock, so the zCDP ledger admits exactly as many as one
// after the other: the 38 the conversion allows, never one more.
func TestZCDPConcurrentChargesNeverOverspend(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	admin := newPool(t, dbURL, 1, nil)
	if _, err := Open(context.Background(), admin, users("zed", 5.0, 1e-6), Options{Accounting: conf.AccountingZCDP}); err != nil {
		t.Fatal(err)
	}
	const workers, tries = 12, 6
	var admittedCount atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		l, err := Open(context.Background(), newPool(t, dbURL, 1, nil), nil, Options{Accounting: conf.AccountingZCDP})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			<-start
			for i := range tries {
				_, err := l.Charge(context.Background(), Charge{Analyst: "zed", Epsilon: 0.5, Delta: 1e-8, Rho: 0.01, Fingerprint: fmt.Sprintf("w%d-%d", w, i)})
				var ex *ExhaustedError
				switch {
				case err == nil:
					admittedCount.Add(1)
				case !errors.As(err, &ex):
					t.Errorf("charge failed other than by exhaustion: %v", err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if got := admittedCount.Load(); got != 38 {
		t.Errorf("%d concurrent charges admitted, want 38", got)
	}
	var rho, n string
	if err := admin.QueryRow(context.Background(), `SELECT b.rho_spent::text, (SELECT count(*)::text FROM dpproxy.charges c WHERE c.analyst = 'zed' AND c.action = 'charge')
		FROM dpproxy.budgets b WHERE b.analyst = 'zed'`).Scan(&rho, &n); err != nil {
		t.Fatal(err)
	}
	if rho != "0.38" || n != "38" {
		t.Errorf("rho_spent = %s, charges recorded = %s; want 0.38, 38", rho, n)
	}
}
