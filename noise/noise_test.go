package noise

import (
	"errors"
	"math"
	mrand "math/rand/v2"
	"sync"
	"testing"
)

// Statistical tests below draw n samples of Add(0, ...) and compare them with
// the theory computed here independently of the package (b = l0·lInf/ε; σ
// checked against the Balle–Wang equation in TestGaussianSigmaIsTight).
//
// Each check allows z = 5 standard errors of its estimator. Under the normal
// approximation (n = 20000 makes the CLT accurate for these estimators) one
// two-sided check fails by chance with probability 2·(1−Φ(5)) ≈ 5.7e-7. The
// file makes at most 30 such checks, so the false-failure rate of a run is
// below 30 · 5.7e-7 ≈ 1.7e-5 (union bound).
//
// Power: a scale off by 20% (×0.8 or ×1.2) moves the variance by −36% or
// +44% and the 95% coverage to 0.976 / 0.918 (Laplace) or 0.986 / 0.898
// (Gaussian). The tolerances (below 8% on the variance, 0.0077 on the
// coverage) reject all of these.
//
// With -short (e.g. under -race, which slows the samplers tenfold) n is 5000:
// the tolerances widen to 16% on the variance and 0.015 on the coverage,
// which still reject a 20% error in the scale.
const zTol = 5.0

func nSamples() int {
	if testing.Short() {
		return 5000
	}
	return 20000
}

type setting struct {
	l0         int64
	lInf, eps  float64
	delta      float64 // 0 for Laplace
	confidence float64
}

func draw(t *testing.T, m Mechanism, s setting, x float64) []float64 {
	t.Helper()
	out := make([]float64, nSamples())
	for i := range out {
		y, err := m.Add(x, s.l0, s.lInf, s.eps, s.delta)
		if err != nil {
			t.Fatalf("%s.Add(%v, %+v): %v", m.Name(), x, s, err)
		}
		out[i] = y
	}
	return out
}

func meanVar(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

// checkSamples compares mean, variance and coverage of ErrorBound with the
// theory. kurtosis is E[X⁴]/σ⁴ of the noise (6 for Laplace, 3 for Gaussian):
// the sample variance has relative standard error √((kurtosis−1)/n), i.e.
// √(5/n) ≈ 1.6% for Laplace and √(2/n) = 1% for Gaussian.
func checkSamples(t *testing.T, m Mechanism, s setting, xs []float64, wantVar, kurtosis float64) {
	t.Helper()
	n := float64(len(xs))
	mean, v := meanVar(xs)
	if se := math.Sqrt(wantVar / n); math.Abs(mean) > zTol*se {
		t.Errorf("%s %+v: mean %v, want 0 ± %v", m.Name(), s, mean, zTol*se)
	}
	relSE := math.Sqrt((kurtosis - 1) / n)
	if rel := v/wantVar - 1; math.Abs(rel) > zTol*relSE {
		t.Errorf("%s %+v: variance %v, want %v (relative error %.4f, allowed %.4f)", m.Name(), s, v, wantVar, rel, zTol*relSE)
	}

	bound, err := m.ErrorBound(s.l0, s.lInf, s.eps, s.delta, s.confidence)
	if err != nil {
		t.Fatalf("%s.ErrorBound(%+v): %v", m.Name(), s, err)
	}
	inside := 0
	for _, x := range xs {
		if math.Abs(x) <= bound {
			inside++
		}
	}
	// The count inside is Binomial(n, c): standard error √(c(1−c)/n).
	cov := float64(inside) / n
	if se := math.Sqrt(s.confidence * (1 - s.confidence) / n); math.Abs(cov-s.confidence) > zTol*se {
		t.Errorf("%s %+v: coverage of ErrorBound %v is %v, want %v ± %v", m.Name(), s, bound, cov, s.confidence, zTol*se)
	}
}

func TestLaplaceDistribution(t *testing.T) {
	m := Laplace()
	for _, s := range []setting{
		{l0: 1, lInf: 1, eps: 1, confidence: 0.95},
		{l0: 4, lInf: 8, eps: 0.5, confidence: 0.95},          // COUNT, 4 groups, 8 rows
		{l0: 1, lInf: 8 * 250, eps: 0.1 / 3, confidence: 0.5}, // centred sum of [0,500]
	} {
		b := float64(s.l0) * s.lInf / s.eps
		wantVar := 2 * b * b
		sd, err := m.StdDev(s.l0, s.lInf, s.eps, s.delta)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(sd-math.Sqrt(wantVar)) > 1e-12*sd {
			t.Errorf("StdDev(%+v) = %v, want %v", s, sd, math.Sqrt(wantVar))
		}
		eb, err := m.ErrorBound(s.l0, s.lInf, s.eps, s.delta, s.confidence)
		if err != nil {
			t.Fatal(err)
		}
		if want := b * math.Log(1/(1-s.confidence)); math.Abs(eb-want) > 1e-12*want {
			t.Errorf("ErrorBound(%+v) = %v, want %v", s, eb, want)
		}
		checkSamples(t, m, s, draw(t, m, s, 0), wantVar, 6)
	}
}

func TestGaussianDistribution(t *testing.T) {
	m := Gaussian()
	for _, s := range []setting{
		{l0: 1, lInf: 1, eps: 1, delta: 1e-6, confidence: 0.95},
		{l0: 4, lInf: 8, eps: 0.5, delta: 1e-7, confidence: 0.95},
		{l0: 9, lInf: 100, eps: 2, delta: 1e-9, confidence: 0.5},
	} {
		sigma, err := m.StdDev(s.l0, s.lInf, s.eps, s.delta)
		if err != nil {
			t.Fatal(err)
		}
		eb, err := m.ErrorBound(s.l0, s.lInf, s.eps, s.delta, s.confidence)
		if err != nil {
			t.Fatal(err)
		}
		// Φ⁻¹(0.975) = 1.959963984540054, Φ⁻¹(0.75) = 0.6744897501960817.
		z := map[float64]float64{0.95: 1.959963984540054, 0.5: 0.6744897501960817}[s.confidence]
		if want := sigma * z; math.Abs(eb-want) > 1e-9*want {
			t.Errorf("ErrorBound(%+v) = %v, want %v", s, eb, want)
		}
		checkSamples(t, m, s, draw(t, m, s, 0), sigma*sigma, 3)
	}
}

// gaussDelta is δ(σ) of the analytic Gaussian mechanism (Balle & Wang 2018,
// Thm. 8) for L2 sensitivity l2: Φ(l2/2σ − εσ/l2) − e^ε·Φ(−l2/2σ − εσ/l2).
func gaussDelta(sigma, l2, eps float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	a, b := l2/(2*sigma), eps*sigma/l2
	return phi(a-b) - math.Exp(eps)*phi(-a-b)
}

// TestGaussianSigmaIsTight checks StdDev independently of the library: σ
// must achieve δ for L2 = √l0·lInf, yet σ·0.99 must not (within the
// library's 0.1% accuracy); it must not exceed the classical bound. A σ off
// by 20% fails one of the two δ checks.
func TestGaussianSigmaIsTight(t *testing.T) {
	m := Gaussian()
	for _, s := range []setting{
		{l0: 1, lInf: 1, eps: 1, delta: 1e-6},
		{l0: 4, lInf: 8, eps: 0.5, delta: 1e-7},
		{l0: 9, lInf: 100, eps: 2, delta: 1e-9},
		{l0: 16, lInf: 0.25, eps: 0.1, delta: 1e-5},
	} {
		sigma, err := m.StdDev(s.l0, s.lInf, s.eps, s.delta)
		if err != nil {
			t.Fatal(err)
		}
		l2 := math.Sqrt(float64(s.l0)) * s.lInf
		if d := gaussDelta(sigma, l2, s.eps); d > s.delta {
			t.Errorf("%+v: σ = %v gives δ = %v > %v", s, sigma, d, s.delta)
		}
		if d := gaussDelta(0.99*sigma, l2, s.eps); d <= s.delta {
			t.Errorf("%+v: σ = %v is not tight: 0.99σ already gives δ = %v", s, sigma, d)
		}
		if s.eps <= 1 {
			classic := l2 * math.Sqrt(2*math.Log(1.25/s.delta)) / s.eps
			if sigma > classic {
				t.Errorf("%+v: σ = %v exceeds the classical %v", s, sigma, classic)
			}
		}
	}
}

// TestLaplaceGrid checks that outputs lie on the library's power-of-two
// grid g = 2^⌈log2(b/2^40)⌉ (secure_noise_math.go ceilPowerOfTwo, laplace
// _noise.go addLaplaceFloat64), whatever x is: the input is snapped to the
// grid too. A naive float sampler (b·ln U) has no such grid; the test shows
// that on such samples the check fails, so it is not vacuous.
func TestLaplaceGrid(t *testing.T) {
	m := Laplace()
	tests := []struct {
		s setting
		x float64
		g float64
	}{
		// b = 3·2^40, b/2^40 = 3, g = 4: outputs are multiples of 4.
		{setting{l0: 1, lInf: 3 * 0x1p40, eps: 1}, 0, 4},
		{setting{l0: 1, lInf: 3 * 0x1p40, eps: 1}, 1.3, 4},
		// b = 1, g = 2^-40: near 1 a float64 has 12 more bits than that.
		{setting{l0: 1, lInf: 1, eps: 1}, 0, 0x1p-40},
		// b = 32/0.7 = 45.7, b/2^40 = 2^-34.49, g = 2^-34.
		{setting{l0: 4, lInf: 8, eps: 0.7}, 0, 0x1p-34},
	}
	onGrid := func(y, g float64) bool { return math.Mod(y, g) == 0 }
	for _, tt := range tests {
		distinct := map[float64]bool{}
		for range 2000 {
			y, err := m.Add(tt.x, tt.s.l0, tt.s.lInf, tt.s.eps, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !onGrid(y, tt.g) {
				t.Fatalf("Add(%v, %+v) = %v, not a multiple of %v", tt.x, tt.s, y, tt.g)
			}
			distinct[y] = true
		}
		if len(distinct) < 1900 {
			t.Errorf("Add(%v, %+v): only %d distinct outputs of 2000", tt.x, tt.s, len(distinct))
		}
		// A naive continuous sampler lands on the grid with probability
		// about g/ulp(y) ≤ 2^-10 per sample here; 2000 samples all on it
		// would be a near-impossible event.
		b := float64(tt.s.l0) * tt.s.lInf / tt.s.eps
		naiveOn := 0
		r := mrand.New(mrand.NewPCG(1, 2))
		for range 2000 {
			y := tt.x - b*math.Log(1-r.Float64())
			if r.IntN(2) == 0 {
				y = tt.x + b*math.Log(1-r.Float64())
			}
			if onGrid(y, tt.g) {
				naiveOn++
			}
		}
		if naiveOn > 100 {
			t.Errorf("grid %v does not discriminate: %d of 2000 naive samples lie on it", tt.g, naiveOn)
		}
	}
}

func TestThreshold(t *testing.T) {
	t.Run("laplace", func(t *testing.T) {
		// l0 = 4 partitions, lInf = 1 unit, ε = 1, δ = 1e-7: per partition
		// δ_p = 1−(1−δ)^(1/4), k = 1 − b·ln(2δ_p) with b = 4.
		k, err := Laplace().Threshold(4, 1, 1, 0, 1e-7)
		if err != nil {
			t.Fatal(err)
		}
		dp := -math.Expm1(math.Log1p(-1e-7) / 4)
		if want := 1 - 4*math.Log(2*dp); math.Abs(k-want) > 1e-6*want {
			t.Errorf("Threshold = %v, want %v", k, want)
		}
		// The probability that a partition with one unit (value 1) passes is
		// P(Lap(b) ≥ k−1) = ½e^(−(k−1)/b), which must be ≤ δ_p.
		if p := 0.5 * math.Exp(-(k-1)/4); p > dp*(1+1e-9) {
			t.Errorf("threshold %v lets a single unit through with probability %v > %v", k, p, dp)
		}
	})
	t.Run("gaussian", func(t *testing.T) {
		m := Gaussian()
		for _, td := range []float64{1e-5, 1e-7, 1e-12, 1e-18, 1e-300} {
			k, err := m.Threshold(4, 1, 0.5, 1e-7, td)
			if err != nil {
				t.Fatalf("Threshold(td=%v): %v", td, err)
			}
			sigma, _ := m.StdDev(4, 1, 0.5, 1e-7)
			// Per partition the tail above k−lInf must be ≤ 1−(1−td)^(1/4).
			q := -math.Expm1(math.Log1p(-td) / 4)
			tail := 0.5 * math.Erfc((k-1)/sigma/math.Sqrt2)
			if tail > q*(1+1e-9) {
				t.Errorf("Threshold(td=%v) = %v: tail %v > %v", td, k, tail, q)
			}
			// ... and not wastefully: 1% lower would already exceed it.
			if tail99 := 0.5 * math.Erfc(0.99*(k-1)/sigma/math.Sqrt2); tail99 <= q {
				t.Errorf("Threshold(td=%v) = %v is not tight", td, k)
			}
		}
	})
}

func TestByName(t *testing.T) {
	for _, name := range []string{"laplace", "gaussian"} {
		m, err := ByName(name)
		if err != nil || m.Name() != name {
			t.Errorf("ByName(%q) = %v, %v; want %q", name, m, err, name)
		}
	}
	for _, name := range []string{"", "Laplace", "gauss", "exponential"} {
		if m, err := ByName(name); err == nil {
			t.Errorf("ByName(%q) = %v, want error", name, m)
		}
	}
}

func TestInvalidArguments(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	type call struct {
		name string
		f    func() (float64, error)
	}
	var calls []call
	add := func(name string, f func() (float64, error)) { calls = append(calls, call{name, f}) }

	// Both mechanisms, every method, with one bad argument each.
	for _, m := range []Mechanism{Laplace(), Gaussian()} {
		d := 0.0
		if m.Name() == "gaussian" {
			d = 1e-7
		}
		bad := []struct {
			what      string
			l0        int64
			lInf, eps float64
		}{
			{"l0 0", 0, 1, 1}, {"l0 -1", -1, 1, 1},
			{"lInf NaN", 1, nan, 1}, {"lInf +Inf", 1, inf, 1}, {"lInf 0", 1, 0, 1}, {"lInf -1", 1, -1, 1},
			{"eps NaN", 1, 1, nan}, {"eps +Inf", 1, 1, inf}, {"eps -Inf", 1, 1, -inf},
			{"eps 0", 1, 1, 0}, {"eps -1", 1, 1, -1}, {"eps 1e-300", 1, 1, 1e-300},
			{"eps 1e300", 1, 1, 1e300}, // scale below 2^-900
			{"L1 overflow", math.MaxInt64, 1e300, 1},
			{"scale above 2^900", 1, 1e300, 1e-10},
		}
		for _, b := range bad {
			p := m.Name() + " " + b.what
			add(p+" Add", func() (float64, error) { return m.Add(0, b.l0, b.lInf, b.eps, d) })
			add(p+" StdDev", func() (float64, error) { return m.StdDev(b.l0, b.lInf, b.eps, d) })
			add(p+" ErrorBound", func() (float64, error) { return m.ErrorBound(b.l0, b.lInf, b.eps, d, 0.95) })
			add(p+" Threshold", func() (float64, error) { return m.Threshold(b.l0, b.lInf, b.eps, d, 1e-7) })
		}
		for _, x := range []float64{nan, inf, -inf} {
			add(m.Name()+" Add x non-finite", func() (float64, error) { return m.Add(x, 1, 1, 1, d) })
		}
		for _, c := range []float64{nan, inf, 0, 1, -0.5, 1.5} {
			add(m.Name()+" ErrorBound confidence", func() (float64, error) { return m.ErrorBound(1, 1, 1, d, c) })
		}
		for _, td := range []float64{nan, inf, 0, 1, -1e-7} {
			add(m.Name()+" Threshold thresholdDelta", func() (float64, error) { return m.Threshold(1, 1, 1, d, td) })
		}
	}
	// Laplace is pure ε-DP: any δ ≠ 0 is a caller bug.
	for _, d := range []float64{1e-7, -1e-7, nan, inf} {
		add("laplace delta", func() (float64, error) { return Laplace().Add(0, 1, 1, 1, d) })
		add("laplace delta StdDev", func() (float64, error) { return Laplace().StdDev(1, 1, 1, d) })
		add("laplace noiseDelta", func() (float64, error) { return Laplace().Threshold(1, 1, 1, d, 1e-7) })
	}
	g := Gaussian()
	for _, d := range []float64{0, -1e-7, 1, 2, nan, inf} {
		add("gaussian delta", func() (float64, error) { return g.Add(0, 1, 1, 1, d) })
		add("gaussian delta StdDev", func() (float64, error) { return g.StdDev(1, 1, 1, d) })
		add("gaussian noiseDelta", func() (float64, error) { return g.Threshold(1, 1, 1, d, 1e-7) })
	}
	// Inputs the library mishandles: e^ε overflows (σ = 0, NaN output), and
	// an L2 and δ whose σ overflows (SigmaForGaussian would never return).
	add("gaussian eps 1000", func() (float64, error) { return g.Add(0, 1, 1, 1000, 1e-7) })
	add("gaussian sigma overflow", func() (float64, error) { return g.Add(0, 1<<40, 1e300, 1, 1e-300) })
	add("gaussian threshold deltas sum to 1", func() (float64, error) { return g.Threshold(1, 1, 1, 0.5, 0.5) })

	for _, c := range calls {
		y, err := c.f()
		var pe *ParamError
		if !errors.As(err, &pe) {
			t.Errorf("%s = %v, %v; want a *ParamError", c.name, y, err)
			continue
		}
		if pe.SQLState() != "22023" {
			t.Errorf("%s: SQLState %q", c.name, pe.SQLState())
		}
	}
}

// TestConcurrentUse is for -race: mechanisms are shared by all sessions.
func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		m := Laplace()
		d := 0.0
		if i%2 == 1 {
			m, d = Gaussian(), 1e-7
		}
		wg.Go(func() {
			for range 200 {
				if _, err := m.Add(10, 2, 3, 1, d); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkAdd measures one noised value per mechanism: the proxy draws
// one per released aggregate and group.
func BenchmarkAdd(b *testing.B) {
	for _, m := range []Mechanism{Laplace(), Gaussian()} {
		b.Run(m.Name(), func(b *testing.B) {
			for b.Loop() {
				if _, err := m.Add(1000, 4, 800, 0.5, benchDelta(m)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkThreshold measures one partition-selection threshold.
func BenchmarkThreshold(b *testing.B) {
	for _, m := range []Mechanism{Laplace(), Gaussian()} {
		b.Run(m.Name(), func(b *testing.B) {
			for b.Loop() {
				if _, err := m.Threshold(4, 1, 0.5, benchDelta(m), 1e-8); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchDelta is the noise δ a mechanism takes: 0 for Laplace (pure ε-DP).
func benchDelta(m Mechanism) float64 {
	if m.Name() == "gaussian" {
		return 1e-8
	}
	return 0
}
