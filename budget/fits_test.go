package budget

import (
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

func fitLimits(eps, delta float64) Limits {
	return Limits{Epsilon: numericOf(eps), Delta: numericOf(delta)}
}

// TestFits: the count is what admitting the same charge in a row gives,
// under each accountant: exact under basic composition (ten charges of 0.1
// make exactly 1), the filter's 240 at ε = 0.1 under advanced accounting
// (docs/privacy-model.md), never fewer than basic under zCDP, capped at
// MaxFits, 0 when nothing fits, and counted from the totals given.
func TestFits(t *testing.T) {
	mustAcct := func(name string) Accountant {
		a, err := NewAccountantWith(Options{Accounting: name, AdvancedDelta: 1e-7})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	basic, zcdp, adv := mustAcct(conf.AccountingBasic), mustAcct(conf.AccountingZCDP), mustAcct(conf.AccountingAdvanced)
	tenth := Charge{Analyst: "a", Epsilon: 0.1}
	one := Charge{Analyst: "a", Epsilon: 1}
	spent3 := Totals{}.plus(one).plus(one).plus(one)
	for _, tc := range []struct {
		name string
		a    Accountant
		t    Totals
		l    Limits
		c    Charge
		want int
	}{
		{"basic 0.1 in 1", basic, Totals{}, fitLimits(1, 0), tenth, 10},
		{"basic 0.1 in 10", basic, Totals{}, fitLimits(10, 1e-6), tenth, 100},
		{"basic 1 after 3", basic, spent3, fitLimits(10, 1e-6), one, 7},
		{"basic δ binds", basic, Totals{}, fitLimits(10, 1e-6), Charge{Analyst: "a", Epsilon: 0.1, Delta: 3e-7}, 3},
		{"basic nothing left", basic, spent3, fitLimits(3, 0), one, 0},
		{"advanced 0.1 in 10", adv, Totals{}, fitLimits(10, 1e-6), tenth, 240},
		{"advanced 1 in 10", adv, Totals{}, fitLimits(10, 1e-6), one, 10},
		{"zcdp 1 in 10", zcdp, Totals{}, fitLimits(10, 1e-6), one, 10},
		{"capped", basic, Totals{}, fitLimits(10, 0), Charge{Analyst: "a", Epsilon: 0.001}, MaxFits},
		{"invalid", basic, Totals{}, fitLimits(10, 0), Charge{Analyst: "a"}, 0},
	} {
		if got := Fits(tc.a, tc.t, tc.l, tc.c); got != tc.want {
			t.Errorf("%s: Fits = %d, want %d", tc.name, got, tc.want)
		}
	}
	if z, b := Fits(zcdp, Totals{}, fitLimits(10, 1e-6), tenth), Fits(basic, Totals{}, fitLimits(10, 1e-6), tenth); z < b {
		t.Errorf("zcdp fits %d queries of ε = 0.1, basic %d: never fewer", z, b)
	}
}

// BenchmarkFits is the worst case: MaxFits charges fit.
func BenchmarkFits(b *testing.B) {
	for _, name := range []string{conf.AccountingBasic, conf.AccountingZCDP, conf.AccountingAdvanced} {
		a, err := NewAccountant(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			c := Charge{Analyst: "a", Epsilon: 0.001, Delta: 1e-12}
			for b.Loop() {
				if Fits(a, Totals{}, fitLimits(100, 1e-6), c) != MaxFits {
					b.Fatal("fewer than MaxFits")
				}
			}
		})
	}
}
