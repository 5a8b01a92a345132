package noisetest

import (
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/noise"
)

// TestExact: no noise, every partition released, and otherwise the
// wrapped mechanism: its name, its error bounds and its refusals.
func TestExact(t *testing.T) {
	for _, m := range []noise.Mechanism{noise.Laplace(), noise.Gaussian()} {
		e := Exact(m)
		delta := 0.0
		if m.Name() == "gaussian" {
			delta = 1e-6
		}
		if e.Name() != m.Name() {
			t.Errorf("Exact(%s).Name() = %q", m.Name(), e.Name())
		}
		for _, x := range []float64{0, 1.5, -7, 123456.789} {
			if got, err := e.Add(x, 4, 8, 0.5, delta); err != nil || got != x {
				t.Errorf("Exact(%s).Add(%v) = %v, %v; want %v", m.Name(), x, got, err, x)
			}
		}
		if th, err := e.Threshold(4, 1, 0.5, delta/2, 1e-7); err != nil || th != 0 {
			t.Errorf("Exact(%s).Threshold = %v, %v; want 0", m.Name(), th, err)
		}
		want, _ := m.StdDev(4, 8, 0.5, delta)
		if got, _ := e.StdDev(4, 8, 0.5, delta); got != want {
			t.Errorf("Exact(%s).StdDev = %v, want the wrapped %v", m.Name(), got, want)
		}
		var pe *noise.ParamError
		if _, err := e.Add(1, 4, 8, -1, delta); !errors.As(err, &pe) {
			t.Errorf("Exact(%s).Add with ε = -1: %v, want the wrapped mechanism's ParamError", m.Name(), err)
		}
		if _, err := e.Threshold(4, 1, -1, delta/2, 1e-7); !errors.As(err, &pe) {
			t.Errorf("Exact(%s).Threshold with ε = -1: %v, want a ParamError", m.Name(), err)
		}
	}
}
