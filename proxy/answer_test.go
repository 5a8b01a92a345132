package proxy

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/sensitivity"
)

func TestStoredAnswerRoundTrip(t *testing.T) {
	a := &answer{
		fields: []pgproto3.FieldDescription{
			{Name: []byte("region"), DataTypeOID: oidText, DataTypeSize: -1, TypeModifier: -1},
			{Name: []byte("count"), DataTypeOID: oidInt8, DataTypeSize: 8, TypeModifier: -1, TableOID: 7, TableAttributeNumber: 2},
		},
		// A NULL key, an empty-string key and binary bytes stay distinct.
		rows:    [][][]byte{{nil, []byte("3")}, {[]byte{}, []byte("4")}, {[]byte("\x00\xffé"), []byte("5")}},
		charged: sensitivity.Share{Epsilon: 0.1, Delta: 1e-7},
		bounds:  "count: ±3",
	}
	b, err := encodeAnswer(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Errorf("decodeAnswer(encodeAnswer(a)) = %+v, want %+v", got, a)
	}
	for _, bad := range []string{`{"v":2}`, `not json`, `{"v":1,"fields":[{"name":"a"}],"rows":[["MQ==","Mg=="]]}`} {
		if _, err := decodeAnswer([]byte(bad)); err == nil {
			t.Errorf("decodeAnswer(%s) succeeded", bad)
		}
	}
}

func TestZCDPCost(t *testing.T) {
	count := sensitivity.Count(4, 8) // L0 = 4, L∞ = 8
	share := sensitivity.Share{Epsilon: 0.5, Delta: 1e-8}
	// Laplace: (ε/L0)²/2 per group, L0 groups; the selection's δ is approximate.
	lap := &releaseSpec{mech: noise.Laplace(), aggs: []aggSpec{{count: part{count, share}}},
		sel: part{sensitivity.DistinctUnits(4), sensitivity.Share{Epsilon: 0.5}}, selDelta: 1e-7}
	rho, d, err := zcdpCost(lap)
	if want := 2 * 0.25 / 2 / 4; err != nil || abs(rho-want) > 1e-15 || d != 1e-7 {
		t.Errorf("Laplace: ρ = %v, δ = %v, %v; want %v, 1e-7", rho, d, err, want)
	}
	// Gaussian: Δ2²/(2σ²) with the sampler's σ; half the selection's δ is noise.
	gau := &releaseSpec{mech: noise.Gaussian(), aggs: []aggSpec{{count: part{count, share}}},
		sel: part{sensitivity.DistinctUnits(4), sensitivity.Share{Epsilon: 0.5, Delta: 5e-8}}, selDelta: 1e-7, noiseDel: 5e-8}
	s1, _ := noise.Gaussian().StdDev(4, 8, 0.5, 1e-8)
	s2, _ := noise.Gaussian().StdDev(4, 1, 0.5, 5e-8)
	want := budget.GaussianRho(16, s1) + budget.GaussianRho(2, s2)
	rho, d, err = zcdpCost(gau)
	if err != nil || abs(rho-want) > 1e-15 || d != 5e-8 {
		t.Errorf("Gaussian: ρ = %v, δ = %v, %v; want %v, 5e-8", rho, d, err, want)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
