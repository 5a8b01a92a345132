package proxy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// Red team (issue 17): a differential test of the comparison-constant
// cache. For many generated texts, inside the cache's accepted language
// and just outside it (numbers that lex otherwise, operators that are not
// comparisons, identifiers holding the sentinels, value checks, private
// tables, refusals), whatever srv.analyze answers must be what a full
// analysis of the same text gives: the same error or none, and the same
// statements field by field (the deparse sent upstream above all). Every
// shape is first seen with adversarial values (the probe's sentinels,
// swapped sentinels, leading zeros, 0, the nine-digit maximum), then
// asked again with others, in one server so that shapes of different
// forms share the cache.

// shapeDiffPieces are the building blocks of the generated texts; %s is a
// varying integer.
var (
	shapeDiffSelect = []string{
		"SELECT abalance FROM pgbench_accounts",
		"select aid, bid from pgbench_accounts a",
		"SELECT count(*) FROM pgbench_accounts",
		"SELECT relname FROM pg_class",
		"SELECT g FROM generate_series(1, 100) AS g",
		"SELECT g FROM generate_series(1, %s) AS g",
		"SELECT g FROM generate_series(%s, 20000000) AS g",
		"SELECT count(*) FROM events",
		"SELECT val FROM events",
		"SELECT * FROM pgbench_tellers t",
		"SELECT x987600001 FROM pgbench_accounts",
		"SELECT aid AS a987600001 FROM pgbench_accounts",
		"(SELECT aid FROM pgbench_accounts",
		"SELECT aid = %s FROM pgbench_accounts",
		"SELECT generate_series(1, aid = %s) FROM pgbench_accounts",
		"SELECT repeat(chr(65), 5) FROM pgbench_accounts",
		"SELECT g FROM generate_series(start := 1, stop := %s) AS g",
		"SELECT make_interval(days := %s), aid FROM pgbench_accounts",
		"SELECT make_interval(days =>%s), aid FROM pgbench_accounts",
	}
	shapeDiffPred = []string{
		"aid = %s", "aid=%s", "aid <> %s", "aid != %s", "aid < %s", "aid > %s",
		"aid <= %s", "aid >= %s", "aid =\n%s", "%s = aid", "aid = -%s", "aid =- %s",
		"aid = +%s", "aid => %s", "aid !== %s", "aid <=> %s", "aid <- %s", "aid =< %s",
		"aid = %se5", "aid = 0x%s", "aid = %s_000", "aid = .%s", "aid = %s.", "aid = %s.5",
		"aid = %s::int8", "aid = %s::text::int", "aid = %s + 1", "aid = %s * 1000000",
		"aid = %s / 0", "aid = %s %% 7", "aid = %s0000000000", "aid = 00%s",
		"aid IN (%s, 2)", "aid BETWEEN 1 AND %s", "aid = ANY(ARRAY[%s])",
		"(aid, bid) = (%s, %s)", "aid = (SELECT %s)", "aid = (SELECT max(val) FROM events WHERE val > %s)",
		"1 = %s", "1 <> %s", "%s = 0", "true", "aid = %sand true", "aid = %s AND true",
		"aid = %s OR bid > %s", "NOT aid = %s", "aid = %s IS TRUE", "aid = %s::bool::int",
		"x987600001 = %s", "aid = 987600001 AND bid = %s",
	}
	shapeDiffTail = []string{
		"", ";", " ORDER BY 1", " LIMIT 10", " LIMIT %s", " OFFSET %s", " ORDER BY aid = %s",
		" GROUP BY 1", ") LIMIT 1", "; SELECT 1", "; SET statement_timeout = %s", " FOR UPDATE",
		" FETCH FIRST %s ROWS ONLY", " ORDER BY aid USING < ",
	}
)

// shapeDiffText builds one form (%s for each varying integer).
func shapeDiffText(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(shapeDiffSelect[r.IntN(len(shapeDiffSelect))])
	if r.IntN(6) > 0 {
		b.WriteString(" WHERE ")
		n := 1 + r.IntN(3)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString([]string{" AND ", " OR ", " and\t"}[r.IntN(3)])
			}
			b.WriteString(shapeDiffPred[r.IntN(len(shapeDiffPred))])
		}
	}
	b.WriteString(shapeDiffTail[r.IntN(len(shapeDiffTail))])
	return b.String()
}

// shapeDiffValues gives values for n integers: round 0 is adversarial
// (the probe's sentinels, swapped, or edge values), later rounds random.
func shapeDiffValues(r *rand.Rand, n, round int) []any {
	v := make([]any, n)
	for i := range v {
		switch {
		case round == 0 && r.IntN(2) == 0:
			v[i] = fmt.Sprint(987600001 + i) // the probe's own sentinel
		case round == 0:
			v[i] = fmt.Sprint(987600001 + (n - 1 - i)) // another slot's sentinel
		default:
			switch r.IntN(6) {
			case 0:
				v[i] = "0"
			case 1:
				v[i] = "999999999"
			case 2:
				v[i] = fmt.Sprintf("%09d", r.IntN(1000))
			case 3:
				v[i] = fmt.Sprint(987600001 + r.IntN(n+1))
			default:
				v[i] = fmt.Sprint(r.IntN(2_000_000_000))
			}
		}
	}
	return v
}

// shapeDiffCheck analyses text through the caches and in full and fails
// on any difference.
func shapeDiffCheck(t testing.TB, srv *Server, text string) (cached bool) {
	t.Helper()
	if shape, _, ok := integerShape(text); ok {
		cached = srv.shapes.Contains(shape)
	}
	got, gerr := srv.analyze(text)
	want, werr := srv.analyzer.Analyze(text)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("%q (shape cached before: %v): cache error %v, analysis error %v", text, cached, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q (shape cached before: %v): cache answers\n%+v\nanalysis gives\n%+v", text, cached, got, want)
	}
	return cached
}

func TestShapeCacheDifferential(t *testing.T) {
	srv := benchServer(t)
	r := rand.New(rand.NewPCG(17, 2026))
	forms, hits := 600, 0
	if testing.Short() {
		forms = 150
	}
	for f := 0; f < forms; f++ {
		form := shapeDiffText(r)
		n := strings.Count(form, "%s")
		for round := 0; round < 6; round++ {
			text := fmt.Sprintf(form, shapeDiffValues(r, n, round)...)
			if shapeDiffCheck(t, srv, text) {
				hits++
			}
		}
	}
	if hits == 0 {
		t.Fatal("the shape cache answered no generated text: the test tests nothing")
	}
	t.Logf("%d answers from the shape cache", hits)
}

// FuzzShapeCache: two texts; the first one fills the caches, the second
// is then answered through them, and both must equal a full analysis.
// Normal runs use the seed corpus only.
func FuzzShapeCache(f *testing.F) {
	f.Add("SELECT abalance FROM pgbench_accounts WHERE aid = 987600001", "SELECT abalance FROM pgbench_accounts WHERE aid = 5")
	f.Add("SELECT g FROM generate_series(1, 10) AS g WHERE g = 3 AND g <> 987600002", "SELECT g FROM generate_series(1, 10) AS g WHERE g = 987600002 AND g <> 3")
	f.Add("SELECT x987600001 FROM pgbench_accounts WHERE aid = 987600001", "SELECT x987600001 FROM pgbench_accounts WHERE aid = 1")
	f.Add("SELECT count(*) FROM pgbench_accounts WHERE 1 = 0", "SELECT count(*) FROM pgbench_accounts WHERE 1 = 1")
	f.Add("SELECT relname FROM pg_class WHERE relpages > 0 LIMIT 5", "SELECT relname FROM pg_class WHERE relpages > 00000 LIMIT 5")
	srv := benchServer(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 2000 || len(b) > 2000 {
			return
		}
		shapeDiffCheck(t, srv, a)
		shapeDiffCheck(t, srv, b)
	})
}

// TestShapeCacheConcurrent: sessions filling and reading the same shapes
// at once get each text's own analysis (run with -race).
func TestShapeCacheConcurrent(t *testing.T) {
	srv := benchServer(t)
	forms := []string{
		"SELECT abalance FROM pgbench_accounts WHERE aid = %d AND bid < %d",
		"SELECT relname FROM pg_class WHERE relpages > %d OR relnatts = %d",
		"SELECT g FROM generate_series(1, 100) AS g WHERE g >= %d AND g <> %d",
	}
	done := make(chan error, 8)
	for w := 0; w < 8; w++ {
		go func(w int) {
			r := rand.New(rand.NewPCG(uint64(w), 17))
			for i := 0; i < 200; i++ {
				text := fmt.Sprintf(forms[r.IntN(len(forms))], 987600001+r.IntN(3), r.IntN(1_000_000_000))
				got, gerr := srv.analyze(text)
				want, werr := srv.analyzer.Analyze(text)
				if gerr != nil || werr != nil || !reflect.DeepEqual(got, want) {
					done <- fmt.Errorf("%q: cache %+v %v, analysis %+v %v", text, got, gerr, want, werr)
					return
				}
			}
			done <- nil
		}(w)
	}
	for w := 0; w < 8; w++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
