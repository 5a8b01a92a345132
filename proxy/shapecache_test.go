package proxy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestShapeCacheMatchesAnalysis: for texts that differ only in their
// comparison integers, what the comparison-constant cache answers is what a
// full analysis of the text gives, field by field (the deparse sent
// upstream above all), and the cache did answer.
func TestShapeCacheMatchesAnalysis(t *testing.T) {
	srv := benchServer(t)
	forms := []struct {
		form   string // %d: a varying integer
		cached bool
	}{
		{"SELECT abalance FROM pgbench_accounts WHERE aid = %d;", true},
		{"select abalance from pgbench_accounts where aid=%d", true},
		{"SELECT a.aid, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON a.bid = b.bid WHERE a.aid >= %d AND a.aid < %d ORDER BY 1 LIMIT 10", true},
		{"SELECT count(*) FROM pgbench_accounts WHERE aid <> %d OR bid != %d", true},
		{"SELECT aid = %d AS is_it, abalance::int8 > %d FROM pgbench_accounts WHERE aid IN (1, 2, 3) AND aid <= %d", true},
		{"SELECT * FROM pgbench_tellers t WHERE t.tid = %d AND t.bid = (SELECT bid FROM pgbench_branches WHERE bid = %d)", true},
		{"SELECT relname FROM pg_class WHERE relpages > %d", true},
		{"SELECT g FROM generate_series(1, 100) AS g WHERE g > %d", true},
		{"SELECT %d = aid FROM pgbench_accounts", false},                                // not after a comparison
		{"SELECT aid FROM pgbench_accounts WHERE aid = -%d", false},                     // after a minus
		{"SELECT aid FROM pgbench_accounts WHERE aid = '%d'", false},                    // a string
		{"SELECT aid FROM pgbench_accounts WHERE aid = %d -- c", false},                 // a comment
		{"SELECT aid FROM pgbench_accounts WHERE aid = %d.5", false},                    // not an integer
		{"SELECT count(*) FROM events WHERE val > %d", false},                           // private
		{"SELECT aid FROM pgbench_accounts WHERE aid = %d0000000000", false},            // ten digits or more
		{"WITH x AS (SELECT 1) SELECT aid FROM pgbench_accounts WHERE aid = %d", false}, // not SELECT first
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range forms {
		n := strings.Count(f.form, "%d")
		hits := 0
		for round := 0; round < 30; round++ {
			args := make([]any, n)
			for i := range args {
				switch r.IntN(4) {
				case 0:
					args[i] = r.IntN(10)
				case 1:
					args[i] = 999999999 - r.IntN(3)
				default:
					args[i] = r.IntN(1_000_000)
				}
			}
			text := fmt.Sprintf(f.form, args...)
			if round == 7 && n > 0 {
				text = strings.Replace(text, "= ", "= 00", 1) // leading zeros
			}
			inShapes := false
			if shape, _, ok := integerShape(text); ok {
				inShapes = srv.shapes.Contains(shape)
			}
			got, gerr := srv.analyze(text)
			want, werr := srv.analyzer.Analyze(text)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("%q: cache error %v, analysis error %v", text, gerr, werr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: cache answers\n%+v\nanalysis gives\n%+v", text, *got[0], *want[0])
			}
			if inShapes {
				hits++
			}
		}
		if f.cached != (hits > 0) {
			t.Errorf("%q: %d texts answered by the shape cache, want cached=%v", f.form, hits, f.cached)
		}
	}
}

// TestShapeCacheKeepsValueChecks: a check that reads a constant's value
// (generate_series's bound) still refuses after an allowed text of the
// same statement was cached: the bound is not a varying integer.
func TestShapeCacheKeepsValueChecks(t *testing.T) {
	srv := benchServer(t)
	if _, err := srv.analyze("SELECT g FROM generate_series(1, 10) AS g WHERE g = 3"); err != nil {
		t.Fatal(err)
	}
	_, err := srv.analyze("SELECT g FROM generate_series(1, 900000000) AS g WHERE g = 4")
	if !hasCode(err, pgerr.ProgramLimitExceeded) {
		t.Fatalf("err = %v, want the series bound's refusal", err)
	}
}

func TestIntegerShape(t *testing.T) {
	for _, c := range []struct {
		sql   string
		shape string // with # for a slot; "" when not shaped
		vals  []string
	}{
		{"SELECT a FROM t WHERE a = 12", "SELECT a FROM t WHERE a = #", []string{"12"}},
		{" (SELECT a FROM t WHERE a>=1 AND b<>007)", " (SELECT a FROM t WHERE a>=# AND b<>#)", []string{"1", "007"}},
		{"SELECT a FROM t WHERE a =\n5 LIMIT 5", "SELECT a FROM t WHERE a =\n# LIMIT 5", []string{"5"}},
		{"SELECT a FROM t WHERE a = 123456789", "SELECT a FROM t WHERE a = #", []string{"123456789"}},
		{"SELECT a FROM t WHERE a = 1234567890", "", nil},
		{"SELECT a FROM t WHERE a = 1e5", "", nil},
		{"SELECT a FROM t WHERE a = 1.5", "", nil},
		{"SELECT a FROM t WHERE a = 5x", "", nil},
		{"SELECT a FROM t WHERE a => 5", "", nil},
		{"SELECT a FROM t WHERE a =- 5", "", nil},
		// := and => pass a named argument, which value checks read
		// (red team, issue 17): never a varying integer.
		{"SELECT g FROM generate_series(start := 1, stop := 20000000) AS g WHERE g = 3", "SELECT g FROM generate_series(start := 1, stop := 20000000) AS g WHERE g = #", []string{"3"}},
		{"SELECT make_interval(days := 5) WHERE 1 = 1", "SELECT make_interval(days := 5) WHERE 1 = #", []string{"1"}},
		{"SELECT make_interval(days :=5)", "", nil},
		{"SELECT make_interval(days => 5)", "", nil},
		{"SELECT a FROM t WHERE a = $1", "", nil},
		{"SELECT a FROM t WHERE a = 1 /* */", "", nil},
		{"SELECT a FROM t WHERE a = 1 AND b = E'x'", "", nil},
		{"SELECT \"a\" FROM t WHERE a = 1", "", nil},
		{"SELECT a FROM t WHERE a = 1 AND b = 'é'", "", nil},
		{"SELECT a FROM t WHERE a = 1\x00", "", nil},
		{"SELECTa FROM t WHERE a = 1", "", nil},
		{"SET x = 1", "", nil},
		{"SELECT a FROM t", "", nil},
	} {
		shape, vals, ok := integerShape(c.sql)
		if c.shape == "" {
			if ok {
				t.Errorf("%q: shaped as %q, want not shaped", c.sql, shape)
			}
			continue
		}
		if !ok || strings.ReplaceAll(shape, "\x00", "#") != c.shape || !slices.Equal(vals, c.vals) {
			t.Errorf("%q: got %q %v %v, want %q %v", c.sql, shape, vals, ok, c.shape, c.vals)
		}
	}
}
