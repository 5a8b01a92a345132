package dp

import (
	"fmt"
	"math"

	"github.com/dpproxy/dpproxy/rewrite"
)

// quantileRankBar is the 95% bar of a quantile released by the
// exponential mechanism (quantile.go), in ranks: with probability ≥ 95%
// the chosen bucket holds a value whose rank (among the group's bounded
// rows) is within ±k of p·n. The mechanism picks each of the m buckets
// with probability ∝ exp(ε·u/(2Δu)), u = −(distance in ranks from p·n),
// and some bucket has u = 0, so a bucket with u < −k is picked with
// probability at most m·exp(−ε·k/(2Δu)) (Dwork & Roth, Theorem 3.11);
// that is 5% for k = 2Δu·ln(m/0.05)/ε. The released value is drawn
// inside the chosen bucket, so it is within one bucket width of such a
// value. No bound in the column's units holds for every data set: where
// the data are sparse, a few ranks can span a wide range of values.
func quantileRankBar(buckets int, eps, du float64) float64 {
	return 2 * du * math.Log(float64(buckets)/(1-confidence)) / eps
}

// quantileBarWords words quantileRankBar for the NOTICE.
func quantileBarWords(a *rewrite.Aggregate, eps, du float64) string {
	width := (a.Upper - a.Lower) / float64(max(a.Buckets, 1))
	return fmt.Sprintf("95%%: within %s (one bucket) of a value ranked within ±%s rows of the %s·n-th (n = rows in the group)",
		barText(width), barText(quantileRankBar(a.Buckets, eps, du)), formatNum(a.Quantile))
}
