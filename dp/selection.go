package dp

import (
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// Partition selection: when a group key has no public values, a group is
// released only when its noisy number of distinct units reaches a
// threshold, so that a group one person creates is released with
// probability at most δ.
type selection struct {
	units     Part    // the noisy unit count: L0 groups, L∞ = 1
	delta     float64 // δ of the selection: noise and threshold together
	noiseDel  float64 // the part of delta the (Gaussian) noise takes
	threshold float64
}

// newSelection sets the threshold for the selection's share sel and
// checks its noised part.
func newSelection(m noise.Mechanism, l0 int64, sel sensitivity.Share, gaussian bool) (*selection, error) {
	// The selection's δ pays for the threshold (the chance that a group
	// of one person passes it); Gaussian noise takes half of it.
	s := &selection{delta: sel.Delta}
	thresholdDelta := sel.Delta
	if gaussian {
		s.noiseDel, thresholdDelta = sel.Delta/2, sel.Delta/2
	}
	s.units = Part{sensitivity.DistinctUnits(l0), sensitivity.Share{Epsilon: sel.Epsilon, Delta: s.noiseDel}}
	var err error
	s.threshold, err = m.Threshold(l0, 1, sel.Epsilon, s.noiseDel, thresholdDelta)
	if err != nil {
		return nil, refuse("partition selection: %v", err)
	}
	if err := s.units.check(m); err != nil {
		return nil, err
	}
	return s, nil
}

// keep reports whether a group of units distinct units is released.
func (s *selection) keep(m noise.Mechanism, units float64) (bool, error) {
	nu, err := s.units.add(m, units)
	if err != nil {
		return false, err
	}
	return nu >= s.threshold, nil
}
