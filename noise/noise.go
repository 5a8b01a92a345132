// Package noise adds calibrated Laplace or Gaussian noise to released values.
//
// The samplers are those of Google's differential-privacy library
// (github.com/google/differential-privacy/go/v3/noise), not hand-written
// ones. A naive sampler such as b·log(U) over float64 U leaves holes in the
// set of outputs that depend on the true value, so an output can reveal the
// input exactly (Mironov 2012; Dwork & Roth, Remark 2.1). The library instead
// draws integers from crypto/rand (a two-sided geometric for Laplace, a
// symmetric binomial for Gaussian) and multiplies them by a power-of-two
// granularity, after rounding the input to a multiple of that granularity:
//
//	Laplace:  g = 2^⌈log2(b / 2^40)⌉,  b = L0·L∞/ε (L1 sensitivity over ε),
//	          output = round(x/g)·g + k·g,  k two-sided geometric with
//	          parameter g·ε/(L1+g), so the rounding of x is paid for.
//	Gaussian: g = 2^⌈log2(2σ / 2^57)⌉,  output = round(x/g)·g + k·g,
//	          k a symmetric binomial with variance (σ/g)².
//
// Every output is therefore an exact multiple of g (the tests check this),
// and floating point never sees a continuous sample.
//
// Gaussian calibration: the library's AddNoiseFloat64 computes σ with
// SigmaForGaussian, a binary search on the analytic Gaussian mechanism of
// Balle and Wang (2018, Thm. 8) with L2 sensitivity √L0·L∞ (deltaForGaussian
// in gaussian_noise.go: l2Sensitivity := lInfSensitivity·√l0Sensitivity),
// accurate to 0.1% and rounded up. That is tighter than the classical
// σ = L2·√(2 ln(1.25/δ))/ε.
//
// This package checks every argument itself and returns a *ParamError rather
// than letting bad input reach the library, whose guards are partial: ε is
// only checked against 2^-50, a σ of 0 (ε so large that e^ε overflows)
// yields NaN, a subnormal σ makes its binomial sampler loop forever, and an
// infinite L2 sensitivity makes SigmaForGaussian loop forever. The library
// calls log.Fatal only if crypto/rand fails, which Go ≥ 1.24 treats as fatal
// anyway. Errors depend on the parameters only, never on the value x, except
// that a non-finite x is refused (the rewrite clamps every aggregate, so it
// does not happen) and a result that overflows float64 is refused (that
// needs |x| ≳ 2^980·b, far beyond any clamped aggregate).
package noise

import (
	"fmt"
	"math"

	dpnoise "github.com/google/differential-privacy/go/v3/noise"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Mechanism adds calibrated noise. Implementations are safe for concurrent
// use: they hold no state, and the library's random source is guarded by a
// mutex.
type Mechanism interface {
	// Name is "laplace" or "gaussian", as accepted by ByName.
	Name() string

	// Add returns x plus noise for a value whose L0/L∞ sensitivity is
	// (l0, lInf), at (eps, delta). Laplace requires delta == 0 (pure ε-DP);
	// Gaussian requires 0 < delta < 1.
	Add(x float64, l0 int64, lInf, eps, delta float64) (float64, error)

	// StdDev is the standard deviation of the noise Add adds: Laplace
	// √2·b with b = l0·lInf/eps; Gaussian the library's σ
	// (SigmaForGaussian).
	StdDev(l0 int64, lInf, eps, delta float64) (float64, error)

	// ErrorBound returns t such that |noise| ≤ t with probability
	// confidence, 0 < confidence < 1: Laplace b·ln(1/(1−confidence)),
	// Gaussian σ·Φ⁻¹((1+confidence)/2).
	ErrorBound(l0 int64, lInf, eps, delta, confidence float64) (float64, error)

	// Threshold is the smallest k such that releasing only the partitions
	// whose noisy value (noised by Add with (l0, lInf, eps, noiseDelta)) is
	// at least k is (eps, noiseDelta+thresholdDelta)-DP, the partitions
	// being those a unit can create (library Threshold). For Laplace,
	// noiseDelta must be 0.
	Threshold(l0 int64, lInf, eps, noiseDelta, thresholdDelta float64) (float64, error)
}

// ParamError reports an argument outside the range where the noise is
// well defined. Param is the argument's name ("epsilon", "delta", "l0",
// "lInf", "confidence", "thresholdDelta", "x", "result").
type ParamError struct {
	Mechanism string
	Param     string
	Reason    string // never holds the value of x
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("noise: %s: %s %s", e.Mechanism, e.Param, e.Reason)
}

// SQLState is invalid_parameter_value: a caller may pass the error to a
// client, since the message holds only privacy parameters.
func (e *ParamError) SQLState() string { return string(pgerr.InvalidParameterValue) }

// Refused is true: the parameters are refused before anything is noised
// (and, in the proxy, before anything is charged).
func (e *ParamError) Refused() bool { return true }

// Laplace returns the Laplace mechanism: pure ε-DP with scale
// b = l0·lInf/eps.
func Laplace() Mechanism { return laplace{} }

// Gaussian returns the Gaussian mechanism: (ε, δ)-DP with σ from the
// analytic calibration for L2 sensitivity √l0·lInf.
func Gaussian() Mechanism { return gaussian{} }

// ByName returns the mechanism called name, "laplace" or "gaussian" (exact,
// lower case), or an error.
func ByName(name string) (Mechanism, error) {
	switch name {
	case "laplace":
		return Laplace(), nil
	case "gaussian":
		return Gaussian(), nil
	}
	return nil, fmt.Errorf("noise: unknown mechanism %q, want laplace or gaussian", name)
}

// The library's granularity arithmetic (scale/2^40, 2σ/2^57, rounded up to a
// power of two) must stay within normal float64 numbers; noise scales
// outside [2^-900, 2^900] are nonsense for a query anyway.
const (
	minScale = 0x1p-900
	maxScale = 0x1p900
	// minEpsilon is the library's own floor (checks.CheckEpsilonVeryStrict):
	// its geometric sampler needs ε·g/L1 ≳ 2^-59 to avoid truncation.
	minEpsilon = 0x1p-50
)

const (
	laplaceName  = "laplace"
	gaussianName = "gaussian"
)

func paramErr(mech, param, format string, args ...any) error {
	return &ParamError{Mechanism: mech, Param: param, Reason: fmt.Sprintf(format, args...)}
}

// checkSensitivity validates what both mechanisms need: l0 ≥ 1, lInf finite
// and > 0, eps finite and ≥ 2^-50. The negated comparisons also catch NaN.
func checkSensitivity(mech string, l0 int64, lInf, eps float64) error {
	if l0 < 1 {
		return paramErr(mech, "l0", "= %d, must be at least 1", l0)
	}
	if !(lInf > 0) || math.IsInf(lInf, 1) {
		return paramErr(mech, "lInf", "= %v, must be finite and > 0", lInf)
	}
	if !(eps > 0) || math.IsInf(eps, 1) {
		return paramErr(mech, "epsilon", "= %v, must be finite and > 0", eps)
	}
	if eps < minEpsilon {
		return paramErr(mech, "epsilon", "= %v, must be at least 2^-50", eps)
	}
	return nil
}

func checkScale(mech, what string, s float64) error {
	if !(s >= minScale && s <= maxScale) {
		return paramErr(mech, "epsilon", "gives a noise %s of %v, outside [2^-900, 2^900]", what, s)
	}
	return nil
}

func checkConfidence(mech string, c float64) error {
	if !(c > 0 && c < 1) {
		return paramErr(mech, "confidence", "= %v, must be in (0, 1)", c)
	}
	return nil
}

func checkX(mech string, x float64) error {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return paramErr(mech, "x", "is not finite")
	}
	return nil
}

func checkResult(mech string, y float64) error {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return paramErr(mech, "result", "is not finite (value too large for the noise granularity)")
	}
	return nil
}

type laplace struct{}

func (laplace) Name() string { return laplaceName }

// scale validates the arguments and returns b = l0·lInf/eps.
func (laplace) scale(l0 int64, lInf, eps, delta float64) (float64, error) {
	if err := checkSensitivity(laplaceName, l0, lInf, eps); err != nil {
		return 0, err
	}
	if delta != 0 { // NaN != 0 too
		return 0, paramErr(laplaceName, "delta", "= %v, must be 0 (Laplace is pure ε-DP)", delta)
	}
	b := float64(l0) * lInf / eps
	if err := checkScale(laplaceName, "scale b", b); err != nil {
		return 0, err
	}
	return b, nil
}

func (m laplace) Add(x float64, l0 int64, lInf, eps, delta float64) (float64, error) {
	if _, err := m.scale(l0, lInf, eps, delta); err != nil {
		return 0, err
	}
	if err := checkX(laplaceName, x); err != nil {
		return 0, err
	}
	y, err := dpnoise.Laplace().AddNoiseFloat64(x, l0, lInf, eps, 0)
	if err != nil {
		return 0, fmt.Errorf("noise: laplace: %w", err)
	}
	if err := checkResult(laplaceName, y); err != nil {
		return 0, err
	}
	return y, nil
}

func (m laplace) StdDev(l0 int64, lInf, eps, delta float64) (float64, error) {
	b, err := m.scale(l0, lInf, eps, delta)
	if err != nil {
		return 0, err
	}
	return math.Sqrt2 * b, nil
}

// ErrorBound: P(|Lap(b)| > t) = e^(−t/b), so t = b·ln(1/(1−c)) = −b·log1p(−c).
func (m laplace) ErrorBound(l0 int64, lInf, eps, delta, confidence float64) (float64, error) {
	b, err := m.scale(l0, lInf, eps, delta)
	if err != nil {
		return 0, err
	}
	if err := checkConfidence(laplaceName, confidence); err != nil {
		return 0, err
	}
	return -b * math.Log1p(-confidence), nil
}

func (m laplace) Threshold(l0 int64, lInf, eps, noiseDelta, thresholdDelta float64) (float64, error) {
	if _, err := m.scale(l0, lInf, eps, noiseDelta); err != nil {
		return 0, err
	}
	if !(thresholdDelta > 0 && thresholdDelta < 1) {
		return 0, paramErr(laplaceName, "thresholdDelta", "= %v, must be in (0, 1)", thresholdDelta)
	}
	k, err := dpnoise.Laplace().Threshold(l0, lInf, eps, 0, thresholdDelta)
	if err != nil {
		return 0, fmt.Errorf("noise: laplace: %w", err)
	}
	if err := checkResult(laplaceName, k); err != nil {
		return 0, err
	}
	return k, nil
}

type gaussian struct{}

func (gaussian) Name() string { return gaussianName }

// sigma validates the arguments and returns the library's σ.
func (gaussian) sigma(l0 int64, lInf, eps, delta float64) (float64, error) {
	if err := checkSensitivity(gaussianName, l0, lInf, eps); err != nil {
		return 0, err
	}
	if !(delta > 0 && delta < 1) {
		return 0, paramErr(gaussianName, "delta", "= %v, must be in (0, 1)", delta)
	}
	// SigmaForGaussian doubles its upper bound, starting at L2, until it
	// exceeds the tight σ, and never stops if that overflows. The tight σ is
	// at most the classical L2·√(2 ln(1.25/δ))/min(ε, 1) (Dwork & Roth,
	// Thm. A.1, for ε ≤ 1; σ only falls as ε grows), so bounding that
	// bounds every value the search visits by 2^901.
	l2 := math.Sqrt(float64(l0)) * lInf
	classic := l2 * math.Sqrt(2*(math.Log(1.25)-math.Log(delta))) / math.Min(eps, 1)
	if !(classic <= maxScale) {
		return 0, paramErr(gaussianName, "epsilon", "and delta give a noise scale above 2^900")
	}
	s := dpnoise.SigmaForGaussian(l0, lInf, eps, delta)
	if err := checkScale(gaussianName, "sigma", s); err != nil {
		return 0, err
	}
	return s, nil
}

func (m gaussian) Add(x float64, l0 int64, lInf, eps, delta float64) (float64, error) {
	if _, err := m.sigma(l0, lInf, eps, delta); err != nil {
		return 0, err
	}
	if err := checkX(gaussianName, x); err != nil {
		return 0, err
	}
	// The library recomputes the same σ (SigmaForGaussian is deterministic).
	y, err := dpnoise.Gaussian().AddNoiseFloat64(x, l0, lInf, eps, delta)
	if err != nil {
		return 0, fmt.Errorf("noise: gaussian: %w", err)
	}
	if err := checkResult(gaussianName, y); err != nil {
		return 0, err
	}
	return y, nil
}

func (m gaussian) StdDev(l0 int64, lInf, eps, delta float64) (float64, error) {
	return m.sigma(l0, lInf, eps, delta)
}

// ErrorBound: P(|N(0,σ²)| ≤ t) = erf(t/(σ√2)), so t = σ·√2·erfinv(c),
// which is σ·Φ⁻¹((1+c)/2).
func (m gaussian) ErrorBound(l0 int64, lInf, eps, delta, confidence float64) (float64, error) {
	s, err := m.sigma(l0, lInf, eps, delta)
	if err != nil {
		return 0, err
	}
	if err := checkConfidence(gaussianName, confidence); err != nil {
		return 0, err
	}
	return s * math.Sqrt2 * math.Erfinv(confidence), nil
}

// Threshold returns the larger of the library's threshold and one computed
// here without its loss of precision. The library evaluates
// lInf + σ·Φ⁻¹((1−thresholdDelta)^(1/l0)); for thresholdDelta below about
// 1e-14, 1−thresholdDelta rounds and can yield a lower threshold (a larger
// real δ) than charged, and below 1.1e-16 it rounds to 1 and gives +Inf.
// Here the per-partition tail q = 1−(1−δ)^(1/l0) = −expm1(log1p(−δ)/l0) is
// computed accurately and Φ⁻¹(1−q) found by bisection on erfc.
func (m gaussian) Threshold(l0 int64, lInf, eps, noiseDelta, thresholdDelta float64) (float64, error) {
	s, err := m.sigma(l0, lInf, eps, noiseDelta)
	if err != nil {
		return 0, err
	}
	if !(thresholdDelta > 0 && thresholdDelta < 1) || !(noiseDelta+thresholdDelta < 1) {
		return 0, paramErr(gaussianName, "thresholdDelta", "= %v, must be in (0, 1) and with delta %v sum to less than 1", thresholdDelta, noiseDelta)
	}
	q := -math.Expm1(math.Log1p(-thresholdDelta) / float64(l0))
	k := lInf + s*upperQuantile(q)
	lib, err := dpnoise.Gaussian().Threshold(l0, lInf, eps, noiseDelta, thresholdDelta)
	if err != nil {
		return 0, fmt.Errorf("noise: gaussian: %w", err)
	}
	if !math.IsNaN(lib) && !math.IsInf(lib, 0) && lib > k {
		k = lib
	}
	if err := checkResult(gaussianName, k); err != nil {
		return 0, err
	}
	return k, nil
}

// upperQuantile returns z ≥ 0 with P(N(0,1) > z) ≤ q, as small as float64
// allows: the upper end of a bisection on the tail 0.5·erfc(z/√2), which is
// decreasing and accurate in the far tail (it underflows to 0 at z = 40, so
// z ≤ 40). For q ≥ 0.5 it returns 0, which still satisfies the bound.
func upperQuantile(q float64) float64 {
	lo, hi := 0.0, 40.0
	for range 100 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(mid/math.Sqrt2) > q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}
