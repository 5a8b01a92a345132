package dp

import (
	"crypto/rand"
	"math"
	"testing"
)

// TestQuantileEMAccuracy draws medians from a histogram with the
// exponential mechanism (crypto/rand) and checks the error. With 10,000
// values uniform over 100 buckets of [0, 100], ε = 1 and Δu = 4, a bucket
// whose rank distance from the median exceeds 2Δu/ε·(ln 100 + ln 1e6) ≈ 148
// (1.5 buckets) is drawn with probability < 1e-6, so every draw must be
// within 3 of 50: a false failure over 200 draws has probability < 2e-4.
func TestQuantileEMAccuracy(t *testing.T) {
	hist := make([]float64, 100)
	for i := range hist {
		hist[i] = 100
	}
	var sum float64
	for range 200 {
		v, err := quantileEM(rand.Reader, hist, 0, 100, 0.5, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(v-50) > 3 {
			t.Errorf("median draw %v, want within 3 of 50", v)
		}
		sum += math.Abs(v - 50)
	}
	t.Logf("mean absolute error %.3f", sum/200)
	// A low ε spreads the choice: with ε → 0 the draw is nearly uniform,
	// so draws far from the median must occur (P(all 200 within 10) ≈ 0.2^200).
	far := 0
	for range 200 {
		v, _ := quantileEM(rand.Reader, hist, 0, 100, 0.5, 1e-9, 4)
		if math.Abs(v-50) > 10 {
			far++
		}
	}
	if far == 0 {
		t.Error("with ε ≈ 0 every draw is near the median: the mechanism ignores ε")
	}
	// p = 0.9 lands near 90.
	v, _ := quantileEM(rand.Reader, hist, 0, 100, 0.9, 1, 4)
	if math.Abs(v-90) > 3 {
		t.Errorf("0.9 quantile draw %v, want near 90", v)
	}
	if _, err := quantileEM(rand.Reader, hist, 0, 100, 0.5, 0, 4); err == nil {
		t.Error("ε = 0 accepted")
	}
}

// TestQuantileIsTheBucketMiddle: when one bucket is certain to be chosen,
// the answer is its middle, every time (it used to be a uniform draw in
// the bucket, which only added variance).
func TestQuantileIsTheBucketMiddle(t *testing.T) {
	hist := []float64{0, 1e9, 0, 0}
	for range 50 {
		v, err := quantileEM(rand.Reader, hist, 100, 500, 0.5, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		if v != 250 {
			t.Fatalf("quantile %v, want 250, the middle of [200, 300]", v)
		}
	}
}
