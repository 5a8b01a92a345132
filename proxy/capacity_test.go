package proxy

import (
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

func TestFitConnections(t *testing.T) {
	server := capacity{max: 300, superuser: 3}
	cases := []struct {
		maxConns, private int
		c                 capacity
		fit               int
		fits              bool
	}{
		// The set-up: 500 sessions and 64 ledger connections on
		// a server of 300; now 500 + 20 (16 slots + 4).
		{500, 16, server, 277, false},
		{200, 16, server, 200, true},
		{277, 16, server, 277, true},
		{100, 1000, server, 100, true}, // the ledger pool stays at 64
		{100, 16, capacity{max: 100, superuser: 3, reserved: 5}, 72, false},
		{10, 16, capacity{max: 20, superuser: 3}, -3, false},
	}
	for _, c := range cases {
		l := conf.Limits{MaxConnections: c.maxConns, MaxConcurrentPrivate: c.private}
		fit, fits := fitConnections(l, c.c)
		if fit != c.fit || fits != c.fits {
			t.Errorf("fitConnections(max_connections %d, %d slots, %+v) = %d, %v; want %d, %v", c.maxConns, c.private, c.c, fit, fits, c.fit, c.fits)
		}
	}
}
