package dp

import (
	"crypto/rand"
	"testing"
)

// BenchmarkQuantileEM4096 is the proxy's cost of one quantile release
// over a histogram of 4096 buckets (rewrite/aggregates.go).
func BenchmarkQuantileEM4096(b *testing.B) {
	hist := make([]float64, 4096)
	for i := range hist {
		hist[i] = float64(i % 7)
	}
	for b.Loop() {
		if _, err := quantileEM(rand.Reader, hist, 0, 2000, 0.5, 1, 4); err != nil {
			b.Fatal(err)
		}
	}
}
