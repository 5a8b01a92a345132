package proxy

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/rewrite"
)

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
