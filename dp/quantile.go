package dp

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
	"github.com/dpproxy/dpproxy/sensitivity"
)

// percentile_cont/percentile_disc(p) WITHIN GROUP (ORDER BY arg): the
// exponential mechanism over a histogram of Buckets equal buckets of
// [Lower, Upper] (HistCol). Pure ε-DP: the aggregate's ε, divided among
// the L0 groups one unit can change (sequential composition); no δ.
//
// Why it is ε-DP. In one group, adding or removing one unit changes the
// bounded histogram by at most R rows in total (its rows are scaled by
// least(1, R/n); rewrite/histogram.go), so every bucket's count below it (L_b) and the total N
// move by at most R, and the utility u(b) = −dist(p·N, [L_b, L_b + c_b])
// by at most max(p, 1−p)·R = Δu (sensitivity.QuantileUtility). Choosing b
// with probability ∝ exp(ε·u(b)/(2Δu)) is then ε-DP (McSherry & Talwar
// 2007; Dwork & Roth Thm. 3.10), and the released value, the middle of
// the chosen bucket, is a function of b and the public bounds only
// (post-processing). A unit touches at most L0 groups, each released at
// ε/L0. The bucket count and bounds are public (the plan's), so nothing
// else about the rows is used.
//
// The histogram. The database computes it sparse, one row per group and
// non-empty bucket, and returns it in the group's row as {bucket, count}
// pairs (rewrite/histogram.go, which gives the argument that one unit
// adds at most R to a group's histogram in total and touches at most L0
// groups); parseGroups (groups.go) puts the pairs into a dense histogram
// of all Buckets counts, 0 where no pair came; a group without rows has
// Buckets zeros. The mechanism therefore always chooses among
// every bucket, as the analysis above assumes, and the rows themselves
// never leave the proxy.
//
// Accuracy (bench/RESULTS.md, section 8). At large n the mechanism picks
// the right bucket nearly always, even at ε = 0.1 on 200,000 rows, so the
// error is the bucket's width w: with 64 buckets of [0, 2000] (w = 31.25)
// and the true value anywhere in its bucket, an RMS of w/√12 ≈ 9.0 with
// the answer the bucket's middle (a uniform draw in the bucket only added
// variance w²/12). Finer grids are never worse at any n measured (1,000
// to 200,000 rows; the mechanism's rank error grows only with
// ln(buckets)), so no size estimate is needed to choose a resolution: the
// finest the SQL affords. With the dense histogram (one count(*) FILTER
// per bucket) that was 64; the sparse one costs about the same at 4096
// buckets as the per-unit GROUP BY (measured on 200,000 rows of a numeric
// column: dense, 64 buckets 10.7 s; sparse, 4096 buckets 1.5 s), so
// Buckets is 4096 (rewrite/aggregates.go), and at 200,000 rows the RMS
// error falls from 2.8 to 0.33 at ε = 0.1 and 0.14 at ε = 1. Google's
// dpagg.BoundedQuantiles (a tree of noisy counts, 16^4 leaves) was
// measured at equal ε on the same data and is less accurate and biased
// low; it also needs the raw values in this process, which the proxy
// never receives.

func init() {
	register(rewrite.AggQuantile, true, func(a *rewrite.Aggregate, p Params) (Aggregator, error) {
		return newQuantile(a, p)
	})
}

// quantile is the exponential mechanism of one quantile aggregate: ε per
// group and the utility's sensitivity.
type quantile struct {
	a                *rewrite.Aggregate
	eps, sensitivity float64
	l0               int64
}

func newQuantile(a *rewrite.Aggregate, p Params) (*quantile, error) {
	if a.HistCol < 0 {
		return nil, internal("%s: the plan has no histogram column", a.Func)
	}
	return &quantile{a: a, eps: p.Share.Epsilon / float64(p.L0), sensitivity: sensitivity.QuantileUtility(p.MaxRows, a.Quantile), l0: p.L0}, nil
}

// Parts is empty: the exponential mechanism adds no Laplace or Gaussian
// noise (its cost is rho, cost.go).
func (q *quantile) Parts() []Part { return nil }

// rho is the mechanism's zCDP cost: ε/L0-DP in each of L0 groups,
// ρ = L0·(ε/L0)²/2.
func (q *quantile) rho() float64 { return float64(q.l0) * pureRho(q.eps) }

func (q *quantile) Release(_ noise.Mechanism, rnd io.Reader, g *Group) (float64, error) {
	return quantileEM(rnd, g.Hists[q.a.HistCol], q.a.Lower, q.a.Upper, q.a.Quantile, q.eps, q.sensitivity)
}

func (q *quantile) Bound(name string, _ noise.Mechanism) string {
	return fmt.Sprintf("%s: exponential mechanism over %d buckets of width %s, the answer the chosen bucket's middle (ε=%s per group); %s", name,
		q.a.Buckets, humanBound((q.a.Upper-q.a.Lower)/float64(q.a.Buckets)), formatNum(q.eps), quantileBarWords(q.a, q.eps, q.sensitivity))
}

func (q *quantile) Explain(name string, _ noise.Mechanism) []string {
	a := q.a
	return []string{fmt.Sprintf("Column %s (%s): exponential mechanism over %d buckets of width %s in [%s, %s], the answer the chosen bucket's middle, ε=%s per group (L0=%d), utility sensitivity %s",
		name, a.Func, a.Buckets, humanBound((a.Upper-a.Lower)/float64(a.Buckets)),
		formatNum(a.Lower), formatNum(a.Upper), formatNum(q.eps), q.l0, formatNum(q.sensitivity))}
}

// quantileEM draws the p-quantile of values in [lower, upper] from a
// histogram of len(hist) equal buckets with the exponential mechanism
// (Dwork & Roth §3.4; Smith 2011): bucket b is chosen with probability
// ∝ exp(ε·u(b)/(2Δu)), u(b) = −dist(p·N, [L_b, L_b+c_b]) where L_b is the
// count below b and N the total, and the answer is the middle of it.
// Google's go/v3 has a quantile aggregation (dpagg.BoundedQuantiles, a
// tree of noisy counts), but it consumes the raw values in this process;
// the proxy only ever receives per-group bounded histograms computed by
// the database, and the exponential mechanism over them is pure ε-DP (no
// δ), so this small sampler is written here instead: the choice uses the Gumbel-max trick (argmax of
// ε·u/(2Δu) + Gumbel noise is an exact sample of the exponential
// mechanism) with uniforms from crypto/rand with 53 random bits, and the
// utilities take few distinct values on a coarse grid, so the
// floating-point weakness of naive Laplace samplers does not arise in the
// same way; the output is a function of the chosen bucket alone.
func quantileEM(rnd io.Reader, hist []float64, lower, upper, p, eps, du float64) (float64, error) {
	if len(hist) == 0 || !(upper > lower) {
		return lower, nil
	}
	if !(eps > 0) || !(du > 0) {
		return 0, refuse("quantile: ε and sensitivity must be > 0")
	}
	var total float64
	for _, c := range hist {
		total += math.Max(c, 0)
	}
	target := p * total
	best, bestScore := 0, math.Inf(-1)
	below := 0.0
	// One read for every bucket's uniform: thousands of buckets are read
	// from crypto/rand in one call, not one system call each.
	buf := make([]byte, 8*len(hist))
	if _, err := io.ReadFull(rnd, buf); err != nil {
		return 0, err
	}
	for b, c := range hist {
		c = math.Max(c, 0)
		dist := 0.0
		switch {
		case target < below:
			dist = below - target
		case target > below+c:
			dist = target - below - c
		}
		below += c
		u, err := uniformOf(buf[8*b:8*b+8], rnd)
		if err != nil {
			return 0, err
		}
		score := -eps*dist/(2*du) - math.Log(-math.Log(u))
		if score > bestScore {
			best, bestScore = b, score
		}
	}
	// The middle of the bucket: the point that minimizes the expected
	// squared error for an answer anywhere in it (a uniform draw in the
	// bucket, as before, added variance width²/12 and nothing else).
	width := (upper - lower) / float64(len(hist))
	return math.Min(upper, lower+(float64(best)+0.5)*width), nil
}

// ExponentialQuantile is quantileEM, the release of one quantile from a
// histogram of bounded counts, for bench/.
func ExponentialQuantile(rnd io.Reader, hist []float64, lower, upper, p, eps, sensitivity float64) (float64, error) {
	return quantileEM(rnd, hist, lower, upper, p, eps, sensitivity)
}

// uniformOf is the uniform float64 in (0, 1) of 53 of the random bits of
// b (8 bytes), or, when they are all zero, a fresh one from rnd (uniform).
func uniformOf(b []byte, rnd io.Reader) (float64, error) {
	if v := binary.LittleEndian.Uint64(b) >> 11; v != 0 {
		return float64(v) / (1 << 53), nil
	}
	return uniform(rnd)
}

// uniform returns a uniform float64 in (0, 1) from 53 random bits.
func uniform(rnd io.Reader) (float64, error) {
	var b [8]byte
	for {
		if _, err := io.ReadFull(rnd, b[:]); err != nil {
			return 0, err
		}
		v := binary.LittleEndian.Uint64(b[:]) >> 11
		if v != 0 {
			return float64(v) / (1 << 53), nil
		}
	}
}
