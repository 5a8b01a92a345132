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

// TestZCDPClosedForms: the Canonne–Kamath–Steinke conversion (2020,
// Prop. 12) against its minimum over α computed independently (python: a
// dense scan of log(α−1) then ternary search), and Bun & Steinke's
// ρ + 2√(ρ·ln(1/δ)) it improves on (3, 2.25, 5.76, 0.753, 2.25 for these).
func TestZCDPClosedForms(t *testing.T) {
	e := math.E
	for _, tc := range []struct {
		rho, delta, want float64
	}{
		{1, 1 / e, 1.4830066572794856},
		{0.25, math.Pow(e, -4), 1.5796017290094215},
		{0.5, 1e-6, 5.221534444530169},
		{0.01, 1e-6, 0.6216926545596024},
		{0.1, 1e-5, 1.9142388320035981},
		{0, 1e-9, 0},
		{0.1, 1, math.Inf(1)},
		{0.1, 0, math.Inf(1)},
		{math.NaN(), 0.1, math.Inf(1)},
		{-1, 0.1, math.Inf(1)},
	} {
		got := ZCDPEpsilon(tc.rho, tc.delta)
		if !(math.Abs(got-tc.want) <= 1e-9*math.Max(1, tc.want)) && got != tc.want {
			t.Errorf("ZCDPEpsilon(%v, %v) = %v, want %v", tc.rho, tc.delta, got, tc.want)
		}
		if bs := tc.rho + 2*math.Sqrt(tc.rho*math.Log(1/tc.delta)); tc.delta > 0 && tc.delta < 1 && got > bs {
			t.Errorf("ZCDPEpsilon(%v, %v) = %v, above Bun–Steinke's %v", tc.rho, tc.delta, got, bs)
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
// the zCDP filter admits n while the CKS conversion of n·ρ at
// δ_z = 0.9·1e-6 is <= 5, i.e. 45 (Bun–Steinke at δ = 1e-6 allowed 38).
func TestZCDPAdmitsWhatTheConversionAllows(t *testing.T) {
	t.Parallel()
	c := Charge{Epsilon: 0.5, Delta: 1e-8, Rho: 0.01, Fingerprint: "g"}
	want := 0
	for ZCDPEpsilon(float64(want+1)*c.Rho, 0.9e-6) <= 5 {
		want++
	}
	if want != 45 {
		t.Fatalf("closed form: %d charges fit, want 45", want)
	}
	l, charge := openZCDP(t, 5, 1e-6)
	if got := admitted(t, charge, c); got != want {
		t.Errorf("zCDP ledger admitted %d charges, want %d", got, want)
	}
	s, err := l.Spent(context.Background(), "zed")
	if err != nil {
		t.Fatal(err)
	}
	if s.Accounting != conf.AccountingZCDP || math.Abs(s.EpsilonSpent-ZCDPEpsilon(0.45, 0.9e-6)) > 1e-9 || math.Abs(s.DeltaSpent-0.9e-6) > 1e-18 {
		t.Errorf("Spent = %+v, want zcdp ε %v, δ 9e-7 (set aside)", s, ZCDPEpsilon(0.45, 0.9e-6))
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

// TestZCDPNeverWorseThanBasic: pure charges where the zCDP conversion is
// looser than basic composition are still admitted by the filter's basic
// branch.
func TestZCDPNeverWorseThanBasic(t *testing.T) {
	t.Parallel()
	_, charge := openZCDP(t, 3, 1e-6)
	// ρ = 0.5 per charge: the conversion alone would allow 0.
	if got := admitted(t, charge, Charge{Epsilon: 1, Fingerprint: "l"}); got != 3 {
		t.Errorf("admitted %d, want 3 (basic composition)", got)
	}
}

// TestZCDPApproximateDelta: the δ of the approximate parts (partition
// selection) adds up within δ_g − δ_z = 1e-7: charges of δ = 4e-7 (all of
// it, as basic composition counts) of which 1e-7 is the approximate part:
// the filter admits 1 (basic composition 2), the price of δ_z.
func TestZCDPApproximateDelta(t *testing.T) {
	t.Parallel()
	_, charge := openZCDP(t, 100, 1e-6)
	c := Charge{Epsilon: 1, Delta: 4e-7, Rho: 0.001, DeltaApprox: 1e-7, Fingerprint: "p"}
	if got := admitted(t, charge, c); got != 1 {
		t.Errorf("admitted %d charges, want 1", got)
	}
}

// TestZCDPAccountantCompose: the zCDP filter's decision as a pure
// function, with the figures of the ledger tests above.
func TestZCDPAccountantCompose(t *testing.T) {
	a := zcdpAccountant{share: conf.DefaultRDPDeltaShare}
	g := Charge{Epsilon: 0.5, Delta: 1e-8, Rho: 0.01}
	if n, tot := composeAll(t, a, limitsOf(t, "5", "0.000001"), g); n != 45 || tot.Rho.String() != "0.45" {
		t.Errorf("zCDP admitted %d Gaussian-like charges (ρ total %s), want 45 (0.45)", n, tot.Rho)
	}
	if n, _ := composeAll(t, basicAccountant{}, limitsOf(t, "5", "0.000001"), g); n != 10 {
		t.Errorf("basic admitted %d Gaussian-like charges, want 10", n)
	}
	// Pure charges where zCDP alone admits none: the basic branch admits 3.
	if n, _ := composeAll(t, a, limitsOf(t, "3", "0.000001"), Charge{Epsilon: 1}); n != 3 {
		t.Errorf("zCDP admitted %d charges of ε=1 within 3, want 3 (basic composition)", n)
	}
	// Not pure (a Gaussian charge's δ is not approximate): no basic branch
	// once one is in, whatever Σε.
	mixed, ok := a.Compose(Totals{}, limitsOf(t, "3", "0.000001"), Charge{Epsilon: 1, Delta: 1e-8, Rho: 5})
	if ok {
		t.Errorf("a Gaussian charge of ρ=5 admitted by the basic branch: %+v", mixed)
	}
	if n, _ := composeAll(t, a, limitsOf(t, "100", "0.000001"), Charge{Epsilon: 1, Delta: 4e-7, Rho: 0.001, DeltaApprox: 1e-7}); n != 1 {
		t.Errorf("zCDP admitted %d charges with approximate δ=1e-7 of δ_g − δ_z = 1e-7, want 1", n)
	}
}

// TestWithinZCDPGuard: the approximate parts may not eat into δ_z, however
// small ρ; within that, the conversion at δ_z decides, exactly at the
// boundary.
func TestWithinZCDPGuard(t *testing.T) {
	a := zcdpAccountant{share: 0.9}
	l := limitsOf(t, "100", "0.000001")
	gauss := func(rho, dApprox string) Totals {
		return Totals{Epsilon: mustNumeric(t, "200"), Delta: mustNumeric(t, "0.0000005"), Rho: mustNumeric(t, rho), DeltaApprox: mustNumeric(t, dApprox)}
	}
	for _, dApprox := range []string{"0.0000001000001", "0.000001"} {
		if a.within(gauss("0.0001", dApprox), l) {
			t.Errorf("within with approximate δ %s (δ_g − δ_z = 1e-7) = true", dApprox)
		}
	}
	if !a.within(gauss("0.0001", "0.0000001"), l) {
		t.Error("within with Σδ_approx = δ_g − δ_z and a tiny ρ = false")
	}
	ez := ZCDPEpsilon(1, 0.9e-6)
	at := Limits{Epsilon: numericOf(ez * (1 + 2e-12)), Delta: numericOf(1e-6)}
	if !a.within(gauss("1", "0"), at) {
		t.Error("within at the converted ε = false")
	}
	below := Limits{Epsilon: numericOf(ez * (1 - 1e-9)), Delta: numericOf(1e-6)}
	if a.within(gauss("1", "0"), below) {
		t.Error("within below the converted ε = true")
	}
}

// TestZCDPAccountantReport: Report shows the conversion at δ_z when it is
// the tighter bound or a charge is not pure, δ spent including δ_z; Σε,
// exactly, when pure and tighter.
func TestZCDPAccountantReport(t *testing.T) {
	a := zcdpAccountant{share: 0.9}
	tot := Totals{Epsilon: mustNumeric(t, "7"), Delta: mustNumeric(t, "1e-08"), Rho: mustNumeric(t, "0.2")}
	s := a.Report(tot, limitsOf(t, "5", "0.000001"))
	if s.Accounting != conf.AccountingZCDP || s.EpsilonSpent != ZCDPEpsilon(0.2, 0.9e-6) || math.Abs(s.DeltaSpent-0.9e-6) > 1e-18 || math.Abs(s.DeltaRemaining()-1e-7) > 1e-18 {
		t.Errorf("Report = %+v", s)
	}
	tot = Totals{Epsilon: mustNumeric(t, "0.7"), Rho: mustNumeric(t, "0.245")}
	if s := a.Report(tot, limitsOf(t, "1.0", "0.000001")); s.EpsilonSpent != 0.7 || s.EpsilonRemaining() != 0.3 {
		t.Errorf("Report with Σε tighter = %+v, want Σε's exact figures", s)
	}
}

// TestZCDPConcurrentChargesNeverOverspend: concurrent charges, each worker
// with a pool of its own (as if separate proxies), serialize on the
// analyst's row lock, so the zCDP ledger admits exactly as many as one
// after the other: the 45 the conversion allows, never one more.
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
	if got := admittedCount.Load(); got != 45 {
		t.Errorf("%d concurrent charges admitted, want 45", got)
	}
	var rho, n string
	if err := admin.QueryRow(context.Background(), `SELECT b.rho_spent::text, (SELECT count(*)::text FROM dpproxy.charges c WHERE c.analyst = 'zed' AND c.action = 'charge')
		FROM dpproxy.budgets b WHERE b.analyst = 'zed'`).Scan(&rho, &n); err != nil {
		t.Fatal(err)
	}
	if rho != "0.45" || n != "45" {
		t.Errorf("rho_spent = %s, charges recorded = %s; want 0.45, 45", rho, n)
	}
}
