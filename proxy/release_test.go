package proxy

import (
	"crypto/rand"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/rewrite"
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

func TestReleaseVarianceFeasible(t *testing.T) {
	a := &rewrite.Aggregate{Kind: rewrite.AggVariance, Lower: 0, Upper: 10, CountCol: 0, SumCol: 1, SumSqCol: 2, Sample: true, Stddev: true}
	// Degenerate parts (L0 = 0) add no noise: the exact formula.
	// values 0 and 10 (mid 5): count 2, centred sum 0, centred squares 50.
	v, err := releaseVariance(a, aggSpec{}, nil, []float64{2, 0, 50})
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Sqrt(50.0); math.Abs(v-want) > 1e-9 { // sample variance of {0, 10} is 50
		t.Errorf("stddev_samp = %v, want %v", v, want)
	}
	a.Sample, a.Stddev = false, false
	v, _ = releaseVariance(a, aggSpec{}, nil, []float64{2, 0, 1e9})
	if v != 25 {
		t.Errorf("var_pop with an absurd sum of squares = %v, want clamped to w² = 25", v)
	}
}

func TestPostSQLOnlyReadsReleasedValues(t *testing.T) {
	plan := &rewrite.Plan{Limit: 2, Offset: 1, Post: &rewrite.Post{Targets: "dp.dp_c0 AS region, dp.dp_c1 * 2 AS c2", Where: "dp.dp_c1 > 5", OrderBy: "dp.dp_c1 DESC"}}
	a := &answer{
		fields: []pgproto3.FieldDescription{{Name: []byte("region"), DataTypeOID: 25}, {Name: []byte("count"), DataTypeOID: 20}},
		rows:   [][][]byte{{[]byte(`a"b\c`), []byte("7")}, {nil, []byte("3")}},
	}
	sql, params := postSQL(plan, a)
	want := `SELECT dp.dp_c0 AS region, dp.dp_c1 * 2 AS c2 FROM (SELECT u.c0::text AS dp_c0, u.c1::int8 AS dp_c1 FROM unnest($1::text[], $2::text[]) AS u(c0, c1)) AS dp WHERE dp.dp_c1 > 5 ORDER BY dp.dp_c1 DESC LIMIT 2 OFFSET 1`
	if sql != want {
		t.Errorf("postSQL =\n%s\nwant\n%s", sql, want)
	}
	if got := string(params[0]); got != `{"a\"b\\c",NULL}` {
		t.Errorf("array param = %s", got)
	}
	if strings.Contains(sql, "orders") {
		t.Error("post-processing SQL names a table")
	}
}

// TestReleaseSpecChecksEveryNoisedPart: every noised part of every
// aggregate is checked before the charge. The check used to list the count
// and the sum by hand and forgot variance's sum of squares: with
// variance(val * 1e150) the squares' sensitivity overflows, the sampler
// refuses it, and the query failed after it was charged.
func TestReleaseSpecChecksEveryNoisedPart(t *testing.T) {
	srv := benchServer(t)
	for _, q := range []string{
		"SELECT variance(val * 1e150) FROM events",
		"SELECT stddev(val * 1e150) FROM events",
		"SELECT sum(val * 1e300) FROM events",
		"SELECT avg(val * 1e300) FROM events",
	} {
		stmts, err := srv.analyze(q)
		if err != nil {
			continue // refused by the analyzer: also before any charge
		}
		for _, mech := range []string{"laplace", "gaussian"} {
			ss := benchSession(srv, io.Discard, mech, 1, 1e-7)
			if _, err := ss.releaseSpec(stmts[0].Plan); err == nil {
				t.Errorf("%s (%s): releaseSpec accepted a part the sampler refuses; the query would fail after its charge", q, mech)
			}
		}
	}
	// A control: an ordinary variance is accepted.
	stmts, err := srv.analyze("SELECT variance(val) FROM events")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := benchSession(srv, io.Discard, "laplace", 1, 1e-7).releaseSpec(stmts[0].Plan); err != nil {
		t.Errorf("variance(val): %v", err)
	}
}

// TestTooManyParametersRefusedBeforeTheCharge: the rewrite appends its own
// seed parameter, so a private query may bind at most 65,534: with 65,535
// the seed would be $65536, which the wire protocol cannot carry, and the
// query failed (XX000) after its charge.
func TestTooManyParametersRefusedBeforeTheCharge(t *testing.T) {
	srv := benchServer(t)
	stmts, err := srv.analyze("SELECT count(*) FROM events WHERE val > $1")
	if err != nil {
		t.Fatal(err)
	}
	ss := benchSession(srv, io.Discard, "laplace", 1, 1e-7)
	p := &params{values: make([][]byte, 65535), formats: make([]int16, 65535)}
	for i := range p.values {
		p.values[i] = []byte("1")
	}
	_, err = ss.privateResult(t.Context(), stmts[0], p, nil)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != "54000" {
		t.Fatalf("privateResult with 65,535 parameters: %v, want 54000 before anything runs", err)
	}
}
