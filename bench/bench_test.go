package main

import (
	"bufio"
	"math"
	"strings"
	"testing"
	"time"
)

// The harness itself runs only as `go run ./bench`; these tests keep its
// parsers honest and let CI compile it.

func TestParsePgbenchLog(t *testing.T) {
	log := "0 1 150 0 1700000000 123456\n0 2 90 0 1700000000 123556\nbroken\n1 1 300 0 1700000000 123999 12\n"
	got, err := parsePgbenchLog(bufio.NewScanner(strings.NewReader(log)))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{150, 90, 300}
	if len(got) != len(want) {
		t.Fatalf("parsePgbenchLog = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("latency %d = %v, want %v", i, got[i], want[i])
		}
	}
	if _, err := parsePgbenchLog(bufio.NewScanner(strings.NewReader("0 1 x 0 1 2\n"))); err == nil {
		t.Error("a non-numeric latency was accepted")
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ q, want float64 }{{0.5, 3}, {0.99, 5}, {0.01, 1}, {0.8, 4}} {
		if got := percentile(v, c.q); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", v, c.q, got, c.want)
		}
	}
	if v[0] != 5 {
		t.Error("percentile sorted its input")
	}
	if median([]float64{10, 30, 20}) != 20 {
		t.Error("median of 10, 30, 20 is not 20")
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkPipeline/cached/count-2   3000   21700 ns/op   17200 p50-ns   74900 p99-ns   2062 B/op   124 allocs/op
BenchmarkPassThroughAnalyze/uncached-2  3000  389800 ns/op  22112 B/op  574 allocs/op
PASS`
	got := parseBench([]byte(out))
	if len(got) != 2 {
		t.Fatalf("parseBench found %d lines, want 2: %+v", len(got), got)
	}
	g := got[0]
	if g.name != "Pipeline/cached/count" || g.nsOp != 21700 || g.p50 != 17200 || g.p99 != 74900 || g.bytesOp != 2062 || g.allocs != 124 {
		t.Errorf("parseBench line 1 = %+v", g)
	}
	if !math.IsNaN(got[1].p99) || got[1].allocs != 574 {
		t.Errorf("parseBench line 2 = %+v, want p99 NaN and 574 allocs", got[1])
	}
}

func TestRewrittenSQL(t *testing.T) {
	lines := []string{"DP query over public.events", "Rewritten SQL ($1 is a fresh secret salt per execution):", "SELECT g0", "FROM x"}
	if got := rewrittenSQL(lines); got != "SELECT g0\nFROM x" {
		t.Errorf("rewrittenSQL = %q", got)
	}
	if got := rewrittenSQL(lines[:1]); got != "" {
		t.Errorf("rewrittenSQL without the marker = %q, want empty", got)
	}
}

func TestRatioMedianIsPerRound(t *testing.T) {
	d := &ptCell{tps: []float64{100, 200, 300}}
	x := &ptCell{tps: []float64{90, 100, 290}}
	// Per-round ratios 0.9, 0.5, 0.967: median 0.9 (not 100/200 = 0.5).
	if got := ratioMedian(x, d); math.Abs(got-0.9) > 1e-9 {
		t.Errorf("ratioMedian = %v, want 0.9", got)
	}
}

func TestParsePprofTop(t *testing.T) {
	out := `File: dpproxy
Type: cpu
Duration: 6.02s, Total samples = 1.50s (24.92%)
Showing nodes accounting for 1.50s, 100% of 1.50s total
      flat  flat%   sum%        cum   cum%
     0.60s 40.00% 40.00%      0.60s 40.00%  internal/runtime/syscall/linux.Syscall6
     300ms 20.00% 60.00%      0.30s 20.00%  runtime.findRunnable
     0.15s 10.00% 70.00%      0.15s 10.00%  runtime.mallocgc
     0.15s 10.00% 80.00%      0.15s 10.00%  github.com/jackc/pgx/v5/pgproto3.(*DataRow).Decode (inline)
     0.20s 13.33% 93.33%      0.90s 60.00%  github.com/dpproxy/dpproxy/proxy.(*session).simpleQuery
     0.10s  6.67%   100%      0.10s  6.67%  log/slog.(*Logger).logAttrs
`
	p, err := parsePprofTop(out)
	if err != nil {
		t.Fatal(err)
	}
	if p.total != 1500*time.Millisecond || p.wall != 6020*time.Millisecond {
		t.Errorf("total %v over %v, want 1.5s over 6.02s", p.total, p.wall)
	}
	want := []time.Duration{600, 300, 150, 150, 200, 100}
	for i, b := range p.buckets {
		if b.flat != want[i]*time.Millisecond {
			t.Errorf("bucket %q = %v, want %v", b.name, b.flat, want[i]*time.Millisecond)
		}
	}
	if len(p.top) != 6 || p.top[0].name != "internal/runtime/syscall/linux.Syscall6" || p.top[2].name != "github.com/dpproxy/dpproxy/proxy.(*session).simpleQuery" {
		t.Errorf("top = %v", p.top)
	}
	if _, err := parsePprofTop("no profile here"); err == nil {
		t.Error("output without a total was accepted")
	}
}

func TestRoundRatio(t *testing.T) {
	// Round by round: a drifting machine doubles both timings of round 3;
	// the ratio of the medians would be 130/100.
	dp := []float64{110, 130, 240}
	pre := []float64{100, 100, 200}
	if got := roundRatio(dp, pre); got != 1.2 {
		t.Errorf("roundRatio = %v, want 1.2 (median of 1.1, 1.3, 1.2)", got)
	}
}

func TestMergeReportKeepsSectionsNotRun(t *testing.T) {
	old := "# R\n\nRun on 2026-11-22 04:01 UTC, took 15m25s. Load.\n\n## Machine\n\n- CPU: x\n\n## Setup\n\n- Data: events: 1000 rows\n- pgbench scale 10\n\n## 1. Pass-through\n\nold numbers\n\n## 5. Accuracy\n\nold acc\n\n## Where the gaps come from\n\nold notes\n"
	fresh := "# R\n\nRun on 2026-11-24 07:00 UTC, took 3m. Load.\n\n## Machine\n\n- CPU: y\n\n## Setup\n\n- PostgreSQL settings: a\n\n## 6. Accuracy table\n\nnew table\n\n## Where the gaps come from\n\nnew notes\n"
	got := mergeReport(old, fresh, []string{"passthrough", "accuracy"})
	for _, want := range []string{"- CPU: y", "- Data: events: 1000 rows", "- pgbench scale 10", "- PostgreSQL settings: a", "old numbers", "old acc", "new table", "new notes", "kept from the earlier run (run on 2026-11-22 04:01 UTC, took 15m25s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("merged report lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"- CPU: x", "old notes"} {
		if strings.Contains(got, gone) {
			t.Errorf("merged report keeps %q, which this run replaced:\n%s", gone, got)
		}
	}
	if i, j := strings.Index(got, "old acc"), strings.Index(got, "new table"); i > j {
		t.Errorf("section 5 after section 6:\n%s", got)
	}
	if got := mergeReport(old, fresh, nil); got != fresh {
		t.Errorf("a full run changed by the merge:\n%s", got)
	}
}
