package dp

import (
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
)

// Privacy is what one query may spend and how: the mechanism and the
// query's (ε, δ). It is a value, validated when it is made.
type Privacy struct {
	name           string // the mechanism as the session names it
	mech           noise.Mechanism
	epsilon, delta float64
}

// NewPrivacy validates the session's privacy settings: a known mechanism
// ("laplace" or "gaussian"), ε finite and > 0, δ in [0, 1).
func NewPrivacy(mechanism string, epsilon, delta float64) (Privacy, error) {
	mech, err := noise.ByName(mechanism)
	if err != nil {
		return Privacy{}, refuse("%v", err)
	}
	if !conf.ValidEpsilon(epsilon) {
		return Privacy{}, refuse("ε must be a finite number > 0, got %v", epsilon)
	}
	if !conf.ValidDelta(delta) {
		return Privacy{}, refuse("δ must be in [0, 1), got %v", delta)
	}
	return Privacy{name: mechanism, mech: mech, epsilon: epsilon, delta: delta}, nil
}

// WithSampler returns p whose noise is drawn by wrap(p's mechanism): the
// test-only hook of package proxy (testnoise.go). The budget split still
// follows the mechanism's name.
func (p Privacy) WithSampler(wrap func(noise.Mechanism) noise.Mechanism) Privacy {
	p.mech = wrap(p.mech)
	return p
}

// Mechanism is the sampler that noises the release.
func (p Privacy) Mechanism() noise.Mechanism { return p.mech }

// Epsilon and Delta are the query's budget.
func (p Privacy) Epsilon() float64 { return p.epsilon }
func (p Privacy) Delta() float64   { return p.delta }

// gaussian is whether the session asked for Gaussian noise, which decides
// how δ is split.
func (p Privacy) gaussian() bool { return p.name == conf.Gaussian }
