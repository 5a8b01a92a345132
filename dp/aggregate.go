package dp

import (
	"fmt"
	"io"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// Aggregator releases one aggregate of a plan. Each kind is one file of
// this package, with a constructor that refuses bad parameters, registered
// under its rewrite.AggKind.
type Aggregator interface {
	// Parts are the aggregate's noised quantities: the one list that the
	// checks before the charge, the zCDP cost and the notices iterate.
	Parts() []Part
	// Release noises the aggregate of one group.
	Release(m noise.Mechanism, rnd io.Reader, g *Group) (float64, error)
	// Bound words the released value's error for the NOTICE.
	Bound(name string, m noise.Mechanism) string
	// Explain is the aggregate's lines of EXPLAIN DP.
	Explain(name string, m noise.Mechanism) []string
}

// Params is what a constructor needs besides the aggregate: the plan's
// contribution bounds, the aggregate's share of the budget and the
// sampler that will noise it.
type Params struct {
	L0      int64 // groups one unit may touch (Plan.MaxGroups)
	MaxRows int64 // rows per unit per group (Plan.MaxRows)
	Share   sensitivity.Share
	Mech    noise.Mechanism
}

// kindInfo is one registered aggregate kind.
type kindInfo struct {
	// pure is set when the aggregate is released by a pure ε-DP mechanism
	// whatever the noise (the exponential mechanism of quantiles): it
	// takes no δ under the Gaussian split.
	pure bool
	new  func(a *rewrite.Aggregate, p Params) (Aggregator, error)
}

var registry = map[rewrite.AggKind]kindInfo{}

// register adds an aggregate kind; each aggregate's file calls it from init.
func register(kind rewrite.AggKind, pure bool, new func(a *rewrite.Aggregate, p Params) (Aggregator, error)) {
	if _, dup := registry[kind]; dup {
		panic(fmt.Sprintf("dp: aggregate kind %d registered twice", kind))
	}
	registry[kind] = kindInfo{pure: pure, new: new}
}

// Registered reports whether an aggregate kind can be released.
func Registered(kind rewrite.AggKind) bool {
	_, ok := registry[kind]
	return ok
}

// integral is implemented by the aggregates whose released value is a
// count: rounded to an integer even when its column type is numeric.
type integral interface{ integral() }

// label is the aggregate's name in EXPLAIN DP: as written, and the part
// when it has several.
func label(a *rewrite.Aggregate, part string) string {
	if part == "" {
		return a.Func
	}
	return a.Func + ", " + part + " part"
}

// explainPart is one EXPLAIN DP line of a noised part.
func explainPart(name, label string, m noise.Mechanism, p Part) string {
	return fmt.Sprintf("Column %s (%s): %s", name, label, p.describe(m))
}
