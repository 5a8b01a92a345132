package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

// thm320Epsilon is Dwork & Roth's Theorem 3.20 for k (ε, δ) mechanisms:
// ε√(2k ln(1/δ′)) + kε(e^ε − 1) (valid only with k and ε fixed in
// advance; the reference the filter is compared with).
func thm320Epsilon(k int, eps, deltaPrime float64) float64 {
	return eps*math.Sqrt(2*float64(k)*math.Log(1/deltaPrime)) + float64(k)*eps*math.Expm1(eps)
}

func TestAdvancedClosedForms(t *testing.T) {
	// By hand, ε_g = 10, δ′ = 1e-6: c = ln(1e6) = 13.815510557964274,
	// λ = (c + √(c² + 10c))/10 = (13.8155106 + √329.02359)/10
	// = (13.8155106 + 18.1390071)/10 = 3.1954518; A(0) = c/λ = 4.3234927;
	// A(Σε² = 1) = (1 + λ)/2 + c/λ = 2.0977259 + 4.3234927 = 6.4212186.
	for _, tc := range []struct {
		got, want float64
	}{
		{AdvancedLambda(10, 1e-6), 3.1954518},
		{AdvancedEpsilon(0, 10, 1e-6), 4.3234927},
		{AdvancedEpsilon(1, 10, 1e-6), 6.4212186},
		{AdvancedLambda(10, 1e-7), 3.6635746},     // c = 16.118096, √(c² + 10c) = 20.517650
		{AdvancedEpsilon(1, 10, 1e-7), 6.7313417}, // 2.3317873 + 4.3995544
	} {
		if math.Abs(tc.got-tc.want) > 5e-7 {
			t.Errorf("got %v, want %v (by hand)", tc.got, tc.want)
		}
	}
	for _, bad := range [][3]float64{{-1, 10, 1e-6}, {math.NaN(), 10, 1e-6}, {1, 0, 1e-6}, {1, 10, 0}, {1, 10, 1}, {math.Inf(1), 10, 1e-6}} {
		if e := AdvancedEpsilon(bad[0], bad[1], bad[2]); !math.IsInf(e, 1) {
			t.Errorf("AdvancedEpsilon%v = %v, want +Inf", bad, e)
		}
	}
	// λ maximises (ε_g − c/λ)/(1 + λ), the Σε² the filter admits.
	f := func(l float64) float64 { return (10 - math.Log(1e6)/l) / (1 + l) }
	l := AdvancedLambda(10, 1e-6)
	if f(l) < f(l*1.01) || f(l) < f(l*0.99) {
		t.Errorf("λ = %v does not maximise the admitted Σε²", l)
	}
	// Theorem 3.20 by hand at ε = 0.1, δ′ = 1e-6 (the 216):
	// 0.1·√(2·216·13.8155) + 216·0.1·0.1051709 = 7.7254 + 2.2717 = 9.9972,
	// and k = 217 gives 10.0255.
	if e := thm320Epsilon(216, 0.1, 1e-6); math.Abs(e-9.9971695) > 1e-6 {
		t.Errorf("Thm 3.20 at k = 216: %v, want 9.9971695", e)
	}
	if e := thm320Epsilon(217, 0.1, 1e-6); !(e > 10) {
		t.Errorf("Thm 3.20 at k = 217: %v, want > 10", e)
	}
}

// TestAdvancedCounts: the counts at ε = 0.1 per Laplace query
// within (10, 1e-6): basic 100, Theorem 3.20 216, the filter at least 216
// (240 with the default δ′ = 1e-7, 270 with δ′ = 1e-6); at ε = 1 the
// filter admits what basic does (10).
func TestAdvancedCounts(t *testing.T) {
	l := limitsOf(t, "10", "0.000001")
	laplace := func(eps float64) Charge { return Charge{Epsilon: eps, Fingerprint: "q"} }
	if n, _ := composeAll(t, basicAccountant{}, l, laplace(0.1)); n != 100 {
		t.Errorf("basic admitted %d at ε = 0.1, want 100", n)
	}
	k := 0
	for thm320Epsilon(k+1, 0.1, 1e-6) <= 10 {
		k++
	}
	if k != 216 {
		t.Errorf("Theorem 3.20 allows %d, want 216", k)
	}
	for _, tc := range []struct {
		dPrime float64
		eps    float64
		want   int
	}{
		{1e-7, 0.1, 240}, {1e-6, 0.1, 270}, {1e-7, 1, 10}, {1e-6, 1, 10}, {1e-7, 0.5, 20},
	} {
		a := advancedAccountant{deltaPrime: tc.dPrime}
		n, tot := composeAll(t, a, l, laplace(tc.eps))
		if n != tc.want {
			t.Errorf("advanced (δ′ = %v) admitted %d at ε = %v, want %d", tc.dPrime, n, tc.eps, tc.want)
		}
		if tc.eps == 0.1 && n < 216 {
			t.Errorf("advanced admitted fewer than Theorem 3.20's 216")
		}
		// The last admitted state is certified by one branch.
		s := a.Report(tot, l)
		if s.EpsilonSpent > 10 || s.DeltaSpent > 1e-6 || s.Accounting != conf.AccountingAdvanced {
			t.Errorf("report after %d charges: %+v", n, s)
		}
	}
	// Through NewAccountantWith, with the default δ′.
	a, err := NewAccountant(conf.AccountingAdvanced)
	if err != nil || a.Name() != conf.AccountingAdvanced {
		t.Fatalf("NewAccountant(advanced) = %v, %v", a, err)
	}
	if n, _ := composeAll(t, a, l, laplace(0.1)); n != 240 {
		t.Errorf("default advanced admitted %d, want 240", n)
	}
	if _, err := NewAccountantWith(Options{Accounting: conf.AccountingAdvanced, AdvancedDelta: 1}); err == nil {
		t.Error("δ′ = 1 accepted")
	}
}

// TestAdvancedWithoutDeltaIsBasic: a limit with less δ than δ′ (a pure-ε
// budget) leaves the filter nothing to set aside: basic composition.
func TestAdvancedWithoutDeltaIsBasic(t *testing.T) {
	a := advancedAccountant{deltaPrime: 1e-7}
	for _, d := range []string{"0", "0.00000001"} {
		l := limitsOf(t, "10", d)
		if n, _ := composeAll(t, a, l, Charge{Epsilon: 0.1}); n != 100 {
			t.Errorf("δ limit %s: admitted %d, want basic's 100", d, n)
		}
		s := a.Report(Totals{}, l)
		if s.Accounting != conf.AccountingBasic {
			t.Errorf("δ limit %s: reported in %s", d, s.Accounting)
		}
	}
	// δ′ is set aside: δ charges stop δ′ short of the limit.
	l := limitsOf(t, "10", "0.000001")
	if n, _ := composeAll(t, a, l, Charge{Epsilon: 0.01, Delta: 1e-7}); n != 9 {
		t.Errorf("δ = 1e-7 charges within δ 1e-6 − δ′ 1e-7: admitted %d, want 9", n)
	}
}

// TestAdvancedProperties: random adaptive sequences of charges (ε's of
// mixed sizes, some with δ) through the filter: every admitted state is
// certified by the rule written out independently here; the reported ε and
// δ never decrease; the reported ε is never below the largest single
// release; for pure charges, whatever basic composition admits from the
// same totals the filter admits too.
func TestAdvancedProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 3))
	epsChoices := []float64{0.01, 0.05, 0.1, 0.2, 0.5, 1, 2}
	for trial := 0; trial < 300; trial++ {
		epsLimit := []float64{1, 3, 10, 25}[rng.IntN(4)]
		dLimit := []float64{1e-6, 1e-5, 1e-8}[rng.IntN(3)]
		dPrime := []float64{1e-7, 1e-6, 1e-9}[rng.IntN(3)]
		a := advancedAccountant{deltaPrime: dPrime}
		l := Limits{Epsilon: numericOf(epsLimit), Delta: numericOf(dLimit)}
		pure := rng.IntN(2) == 0
		var tot Totals
		var prev Spend
		maxEps := 0.0
		for step := 0; step < 400; step++ {
			c := Charge{Epsilon: epsChoices[rng.IntN(len(epsChoices))]}
			if !pure && rng.IntN(3) == 0 {
				c.Delta = 1e-9 * float64(1+rng.IntN(50))
			}
			next, ok := a.Compose(tot, l, c)
			basicNext, basicOK := basicAccountant{}.Compose(tot, l, c)
			if basicNext.Epsilon.Cmp(next.Epsilon) != 0 || basicNext.EpsilonSq.Cmp(next.EpsilonSq) != 0 {
				t.Fatalf("the accountants' totals differ")
			}
			if pure && basicOK && a.active(l) && !ok {
				t.Fatalf("trial %d: basic admits ε=%v after %v, the filter refuses", trial, c.Epsilon, tot.Epsilon)
			}
			if !ok {
				continue // a refused charge changes nothing; the analyst may ask a smaller one
			}
			// Independent check of the rule.
			sumEps, sumSq, sumD := next.Epsilon.Float64(), next.EpsilonSq.Float64(), next.Delta.Float64()
			if a.active(l) {
				lam := AdvancedLambda(epsLimit, dPrime)
				A := (1+lam)/2*sumSq + math.Log(1/dPrime)/lam
				if sumD+dPrime > dLimit*(1+1e-12) || (sumEps > epsLimit*(1+1e-12) && A > epsLimit) {
					t.Fatalf("trial %d: admitted Σε=%v Σε²=%v Σδ=%v (A=%v) within (%v, %v), δ′=%v", trial, sumEps, sumSq, sumD, A, epsLimit, dLimit, dPrime)
				}
			} else if sumEps > epsLimit*(1+1e-12) || sumD > dLimit*(1+1e-12) {
				t.Fatalf("trial %d: basic fallback overspent", trial)
			}
			tot = next
			maxEps = math.Max(maxEps, c.Epsilon)
			s := a.Report(tot, l)
			if s.EpsilonSpent < prev.EpsilonSpent || s.DeltaSpent < prev.DeltaSpent {
				t.Fatalf("trial %d: report decreased from %+v to %+v", trial, prev, s)
			}
			if s.EpsilonSpent < maxEps {
				t.Fatalf("trial %d: reported ε %v below the largest release %v", trial, s.EpsilonSpent, maxEps)
			}
			if s.EpsilonSpent > epsLimit*(1+1e-12) || s.DeltaSpent > dLimit*(1+1e-12) {
				t.Fatalf("trial %d: reported spend %+v beyond the limits", trial, s)
			}
			prev = s
		}
	}
}

// TestNumericMul: Σε² is exact, with PostgreSQL's scale (the sum of the
// operands' scales).
func TestNumericMul(t *testing.T) {
	for _, tc := range [][3]string{{"0.1", "0.1", "0.01"}, {"1.5", "-2", "-3.0"}, {"0", "0.25", "0.00"}, {"1e-07", "1e-07", "0.00000000000001"}} {
		got := mustNumeric(t, tc[0]).Mul(mustNumeric(t, tc[1])).String()
		if got != tc[2] {
			t.Errorf("%s × %s = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
	var tot Totals
	for range 3 {
		tot = tot.plus(Charge{Epsilon: 0.1})
	}
	if tot.EpsilonSq.String() != "0.03" {
		t.Errorf("Σε² of three 0.1 = %s, want 0.03", tot.EpsilonSq)
	}
}

// oldSchemaDDL is the ledger's schema before epsilon_sq_spent (the
// statements of schemaDDL that do not mention it).
func oldSchemaDDL() []string {
	var old []string
	for _, s := range schemaDDL() {
		if !strings.Contains(s, "epsilon_sq_spent") {
			old = append(old, s)
		}
	}
	return old
}

// TestMigrationRecomputesEpsilonSq: a ledger created by the previous
// schema, with charges written as the previous code wrote them, opened by
// this version: every charge is kept, Σε and Σδ are unchanged, Σε² is
// recomputed from dpproxy.charges exactly, and the advanced accountant
// continues from there. A second Open changes nothing.
func TestMigrationRecomputesEpsilonSq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := newDB(t)
	pool := newPool(t, dbURL, 2, nil)
	for _, s := range append([]string{createSchema}, oldSchemaDDL()...) {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if queryText(t, pool, `SELECT (`+hasEpsilonSq+`)::text`) != "false" {
		t.Fatal("the old schema has epsilon_sq_spent")
	}
	// Two analysts with charges, a grant and a limit row (not spend), as
	// the previous code recorded them.
	old := map[string][]float64{"ann": {0.1, 0.25, 0.1, 1e-07}, "bob": {2, 0.5}}
	for a, epss := range old {
		sum := Numeric{}
		for _, e := range epss {
			sum = sum.Add(numericOf(e))
			if _, err := pool.Exec(ctx, `INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, action, actor)
				VALUES ($1, 'f', $2::numeric, 0, 'charge', $1)`, a, decimal(e)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pool.Exec(ctx, `INSERT INTO dpproxy.charges (analyst, fingerprint, epsilon, delta, action, actor)
			VALUES ($1, '', 5, 0, 'grant', 'op'), ($1, '', 10, 0.000001, 'limit', 'config')`, a); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO dpproxy.budgets (analyst, epsilon_limit, delta_limit, epsilon_spent, delta_spent)
			VALUES ($1, 10, 0.000001, $2::numeric, 0)`, a, sum.String()); err != nil {
			t.Fatal(err)
		}
	}
	// An analyst with no charges at all.
	if _, err := pool.Exec(ctx, `INSERT INTO dpproxy.budgets (analyst, epsilon_limit, delta_limit) VALUES ('cy', 10, 0.000001)`); err != nil {
		t.Fatal(err)
	}
	before := chargeCount(t, pool, "ann") + "/" + chargeCount(t, pool, "bob")

	l, err := Open(ctx, pool, users("ann", 10.0, 1e-6, "bob", 10.0, 1e-6, "cy", 10.0, 1e-6), Options{Accounting: conf.AccountingAdvanced, AdvancedDelta: 1e-7})
	if err != nil {
		t.Fatal(err)
	}
	if after := chargeCount(t, pool, "ann") + "/" + chargeCount(t, pool, "bob"); after != before {
		t.Errorf("charges %s before the migration, %s after", before, after)
	}
	for a, want := range map[string]string{
		"ann": "0.08250000000001", // 0.01 + 0.0625 + 0.01 + 1e-14
		"bob": "4.25",
		"cy":  "0",
	} {
		got := queryText(t, pool, `SELECT epsilon_sq_spent::text FROM dpproxy.budgets WHERE analyst = $1`, a)
		if !numEq(t, got, want) {
			t.Errorf("%s: epsilon_sq_spent = %s, want %s", a, got, want)
		}
	}
	if got := queryText(t, pool, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = 'ann'`); !numEq(t, got, "0.4500001") {
		t.Errorf("ann: epsilon_spent = %s, want 0.4500001 (unchanged)", got)
	}
	// The totals Go adds to agree with the recomputed ones: bob continues.
	if _, err := l.Charge(ctx, Charge{Analyst: "bob", Epsilon: 0.5, Fingerprint: "new"}); err != nil {
		t.Fatal(err)
	}
	if got := queryText(t, pool, `SELECT epsilon_sq_spent::text FROM dpproxy.budgets WHERE analyst = 'bob'`); !numEq(t, got, "4.5") {
		t.Errorf("bob after one more charge of 0.5: epsilon_sq_spent = %s, want 4.5", got)
	}
	recomputed := queryText(t, pool, `SELECT coalesce(sum(epsilon*epsilon), 0)::text FROM dpproxy.charges WHERE analyst = 'bob' AND action = 'charge'`)
	if !numEq(t, recomputed, "4.5") {
		t.Errorf("charges say Σε² = %s", recomputed)
	}
	// Reopening does not run the migration again (it would be harmless,
	// but the schema is current and Open skips DDL).
	if _, err := Open(ctx, pool, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := queryText(t, pool, `SELECT epsilon_sq_spent::text FROM dpproxy.budgets WHERE analyst = 'bob'`); !numEq(t, got, "4.5") {
		t.Errorf("after reopening: %s", got)
	}
}

// TestAdvancedLedgerAdmitsTheFilter: the ledger with advanced accounting
// admits 240 charges of ε = 0.1 within (10, 1e-6) (δ′ = 1e-7), as the pure
// accountant does, and reports the filter's figures.
func TestAdvancedLedgerAdmitsTheFilter(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newDB(t), 2, nil)
	l, err := Open(context.Background(), pool, users("ada", 10.0, 1e-6), Options{Accounting: conf.AccountingAdvanced, AdvancedDelta: 1e-7})
	if err != nil {
		t.Fatal(err)
	}
	charge := func(c Charge) error {
		c.Analyst = "ada"
		_, err := l.Charge(context.Background(), c)
		return err
	}
	if got := admitted(t, charge, Charge{Epsilon: 0.1, Fingerprint: "q"}); got != 240 {
		t.Errorf("admitted %d, want 240", got)
	}
	s, err := l.Spent(context.Background(), "ada")
	if err != nil {
		t.Fatal(err)
	}
	want := AdvancedEpsilon(2.4, 10, 1e-7)
	if s.Accounting != conf.AccountingAdvanced || math.Abs(s.EpsilonSpent-want) > 1e-9 || math.Abs(s.DeltaSpent-1e-7) > 1e-20 {
		t.Errorf("Spent = %+v, want advanced ε %v, δ 1e-7", s, want)
	}
	if got := queryText(t, pool, `SELECT epsilon_sq_spent::text FROM dpproxy.budgets WHERE analyst = 'ada'`); !numEq(t, got, "2.4") {
		t.Errorf("epsilon_sq_spent = %s, want 2.40", got)
	}
}

// TestAdvancedConcurrentChargesNeverOverspend: many connections charging
// one analyst at once under advanced accounting: the admitted charges,
// added up afterwards, satisfy the filter (or basic composition), and the
// row's totals equal the sums of the recorded charges.
func TestAdvancedConcurrentChargesNeverOverspend(t *testing.T) {
	t.Parallel()
	dbURL := newDB(t)
	admin := newPool(t, dbURL, 2, nil)
	opts := Options{Accounting: conf.AccountingAdvanced, AdvancedDelta: 1e-7}
	if _, err := Open(context.Background(), admin, users("eve", 3.0, 1e-6), opts); err != nil {
		t.Fatal(err)
	}
	amounts := []float64{0.05, 0.1, 0.02, 0.01, 0.05}
	deltas := []float64{0, 0, 1e-8, 0, 0}
	var (
		mu       sync.Mutex
		sumEps   = new(big.Rat)
		sumSq    = new(big.Rat)
		sumD     = new(big.Rat)
		failures []error
		wg       sync.WaitGroup
	)
	start := make(chan struct{})
	for w := range 16 {
		pool := newPool(t, dbURL, 1, nil)
		l, err := Attach(context.Background(), pool, opts)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			<-start
			for i := range 12 {
				k := (w + i) % len(amounts)
				c := Charge{Analyst: "eve", Epsilon: amounts[k], Delta: deltas[k], Fingerprint: fmt.Sprintf("w%d-%d", w, i)}
				_, err := l.Charge(context.Background(), c)
				var ex *ExhaustedError
				mu.Lock()
				switch {
				case err == nil:
					e := ratOf(c.Epsilon)
					sumEps.Add(sumEps, e)
					sumSq.Add(sumSq, new(big.Rat).Mul(e, e))
					sumD.Add(sumD, ratOf(c.Delta))
				case !errors.As(err, &ex):
					failures = append(failures, err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range failures {
		t.Errorf("charge failed other than by exhaustion: %v", err)
	}
	eps, _ := sumEps.Float64()
	sq, _ := sumSq.Float64()
	d, _ := sumD.Float64()
	if d+1e-7 > 1e-6*(1+1e-12) || (eps > 3 && AdvancedEpsilon(sq, 3, 1e-7) > 3) {
		t.Errorf("overspent: Σε=%v Σε²=%v (A=%v) Σδ=%v within (3, 1e-6), δ′ 1e-7", eps, sq, AdvancedEpsilon(sq, 3, 1e-7), d)
	}
	for col, want := range map[string]*big.Rat{"epsilon_spent": sumEps, "epsilon_sq_spent": sumSq, "delta_spent": sumD} {
		got := queryText(t, admin, `SELECT `+col+`::text FROM dpproxy.budgets WHERE analyst = 'eve'`)
		if !numEq(t, got, want.FloatString(20)) {
			t.Errorf("%s = %s, admitted charges sum to %s", col, got, want.FloatString(20))
		}
	}
	recorded := queryText(t, admin, `SELECT coalesce(sum(epsilon*epsilon), 0)::text FROM dpproxy.charges WHERE analyst = 'eve' AND action = 'charge'`)
	if !numEq(t, recorded, sumSq.FloatString(20)) {
		t.Errorf("dpproxy.charges: Σε² = %s, want %s", recorded, sumSq.FloatString(20))
	}
}
