package proxy

import (
	"testing"
	"time"
)

func TestParseLSN(t *testing.T) {
	for in, want := range map[string]uint64{"0/0": 0, "16/B374D848": 0x16<<32 | 0xB374D848, "0/1": 1} {
		if got, err := parseLSN(in); err != nil || got != want {
			t.Errorf("parseLSN(%q) = %x, %v, want %x", in, got, err, want)
		}
	}
	for _, in := range []string{"", "16", "x/1", "1/100000000"} {
		if _, err := parseLSN(in); err == nil {
			t.Errorf("parseLSN(%q) accepted", in)
		}
	}
}

func TestLagOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	h := []walSample{{at(0), 100}, {at(1), 100}, {at(2), 250}, {at(3), 400}}
	for _, tc := range []struct {
		lsn  uint64
		want time.Duration
	}{
		{400, 0},               // caught up
		{500, 0},               // ahead of the last sample
		{300, 1 * time.Second}, // behind since the sample at 3 s
		{100, 2 * time.Second}, // behind since 2 s: the idle 0-1 s do not count
		{50, 4 * time.Second},  // behind since the oldest sample: at least that
	} {
		if got := lagOf(h, tc.lsn, at(4)); got != tc.want {
			t.Errorf("lagOf(replay %d) = %v, want %v", tc.lsn, got, tc.want)
		}
	}
	// An idle primary: however long, a caught-up replica never lags.
	idle := []walSample{{at(0), 7}, {at(100), 7}}
	if got := lagOf(idle, 7, at(100)); got != 0 {
		t.Errorf("idle primary: lag %v", got)
	}
}

func TestPruneHistory(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	h := []walSample{{at(0), 1}, {at(1), 2}, {at(2), 3}, {at(8), 4}, {at(9), 5}}
	got := pruneHistory(h, at(10), 5*time.Second)
	// at(2) is the newest sample older than 5 s: kept, the older ones go.
	if len(got) != 3 || got[0].lsn != 3 {
		t.Errorf("pruneHistory = %v", got)
	}
	if got := pruneHistory(nil, at(10), time.Second); len(got) != 0 {
		t.Errorf("empty history: %v", got)
	}
}
