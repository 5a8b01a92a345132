// Package noisetest holds test doubles of noise mechanisms, in the spirit
// of net/http/httptest: code that tests the release path against exact
// answers uses them; nothing else may.
//
// Importing this package from non-test code is a bug: the dpproxy binary
// must not contain a mechanism that adds no noise. TestShippedBinaryCannot
// SwitchNoiseOff (cmd/dpproxy) checks that the binary's dependency graph
// does not include this package, and proxy.New refuses a
// proxy.Options.TestNoise outside a test binary.
package noisetest

import "github.com/dpproxy/dpproxy/noise"

// Exact returns a mechanism that adds no noise and whose partition
// selection releases every partition, and otherwise behaves as m: its
// Name, StdDev and ErrorBound are m's (so budgets, notices and EXPLAIN DP
// read as with m), and Add and Threshold refuse the parameters m refuses.
// With bounds that never bind it makes a released answer equal to the
// exact answer of the query (e2e/semantic_test.go). Safe for concurrent
// use if m is.
func Exact(m noise.Mechanism) noise.Mechanism { return exact{m} }

type exact struct{ noise.Mechanism }

// Add returns x unchanged, after checking the parameters as m would.
func (e exact) Add(x float64, l0 int64, lInf, eps, delta float64) (float64, error) {
	if _, err := e.Mechanism.StdDev(l0, lInf, eps, delta); err != nil {
		return 0, err
	}
	return x, nil
}

// Threshold is 0: every partition that holds a unit is released.
func (e exact) Threshold(l0 int64, lInf, eps, noiseDelta, thresholdDelta float64) (float64, error) {
	if _, err := e.Mechanism.Threshold(l0, lInf, eps, noiseDelta, thresholdDelta); err != nil {
		return 0, err
	}
	return 0, nil
}
