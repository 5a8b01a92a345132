package proxy

import (
	"testing"
	"time"
)

func TestLazyDeadline(t *testing.T) {
	const d = 8 * time.Second
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var set []time.Time
	record := func(t time.Time) error { set = append(set, t); return nil }

	// Unset: set to now + 9d/8.
	cur := lazyDeadline(record, time.Time{}, now, d)
	if want := now.Add(9 * time.Second); !cur.Equal(want) || len(set) != 1 {
		t.Fatalf("first deadline %v (set %d times), want %v", cur, len(set), want)
	}
	// Still at least d ahead: kept, no timer update.
	if got := lazyDeadline(record, cur, now.Add(time.Second), d); !got.Equal(cur) || len(set) != 1 {
		t.Fatalf("deadline moved to %v (set %d times) while d ahead", got, len(set))
	}
	// Less than d ahead: moved, so a write or an idle wait always gets at
	// least d.
	later := now.Add(1500 * time.Millisecond)
	got := lazyDeadline(record, cur, later, d)
	if want := later.Add(9 * time.Second); !got.Equal(want) || len(set) != 2 || !set[1].Equal(want) {
		t.Fatalf("deadline %v (set %d times), want %v", got, len(set), want)
	}
}
