package proxy

import (
	"errors"
	"io"
	"testing"
)

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
