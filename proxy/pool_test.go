package proxy

import (
	"slices"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestPoolFits: in transaction mode only max_backends connections must
// fit next to the ledger's pool, whatever limits.max_connections is.
func TestPoolFits(t *testing.T) {
	server := capacity{max: 300, superuser: 3}
	for _, c := range []struct {
		backends int
		room     int
		fits     bool
	}{{20, 277, true}, {277, 277, true}, {278, 277, false}} {
		l := conf.Limits{MaxConnections: 5000, Pool: conf.Pool{Mode: conf.PoolTransaction, MaxBackends: c.backends}}
		room, fits := poolFits(l, server)
		if room != c.room || fits != c.fits {
			t.Errorf("poolFits(max_backends %d) = %d, %v; want %d, %v", c.backends, room, fits, c.room, c.fits)
		}
	}
}

// TestPooledStmtName: one name per text and parameter types, the same in
// every session, and a name PostgreSQL keeps whole (under 64 bytes).
func TestPooledStmtName(t *testing.T) {
	const iso, sql = "ISO, MDY", "SQL, DMY"
	a := pooledStmtName(upstreamStmtKey("SELECT $1", []uint32{23}, iso))
	if a != pooledStmtName(upstreamStmtKey("SELECT $1", []uint32{23}, iso)) {
		t.Error("the same statement got two names")
	}
	if a == pooledStmtName(upstreamStmtKey("SELECT $1", []uint32{20}, iso)) || a == pooledStmtName(upstreamStmtKey("SELECT $2", []uint32{23}, iso)) ||
		a == pooledStmtName(upstreamStmtKey("SELECT $1", []uint32{23}, sql)) {
		t.Error("different statements, or one under other settings, got one name")
	}
	if len(a) >= 64 {
		t.Errorf("name %q too long", a)
	}
}

// TestRestoredSettings: the analyst's name and process id are restored
// as the session's own, whatever a RESET ALL left in the captured
// settings, and its other settings as captured.
func TestRestoredSettings(t *testing.T) {
	ss := &session{user: &conf.User{Name: "ann"}, key: cancelKey{pid: 42}}
	ss.settings = [2][]string{{"DateStyle", rewrite.AnalystSetting}, {"SQL, DMY", "someone else"}}
	names, values := ss.restoredSettings()
	wantN := []string{"DateStyle", rewrite.AnalystSetting, rewrite.BackendPIDSetting}
	wantV := []string{"SQL, DMY", "ann", "42"}
	if !slices.Equal(names, wantN) || !slices.Equal(values, wantV) {
		t.Errorf("restoredSettings = %v %v; want %v %v", names, values, wantN, wantV)
	}
}

func TestParseGUCDuration(t *testing.T) {
	for v, want := range map[string]time.Duration{"1500": 1500 * time.Millisecond, "1500ms": 1500 * time.Millisecond, "20s": 20 * time.Second,
		"1min": time.Minute, "2h": 2 * time.Hour, "1d": 24 * time.Hour} {
		if d, ok := parseGUCDuration(v); !ok || d != want {
			t.Errorf("parseGUCDuration(%q) = %v, %v; want %v", v, d, ok, want)
		}
	}
	for _, v := range []string{"", "ms", "1.5s", "3 weeks", "99999999999"} {
		if _, ok := parseGUCDuration(v); ok {
			t.Errorf("parseGUCDuration(%q) accepted", v)
		}
	}
}

// TestMayReadParseTime: a text that may hold 'now', 'today', 'tomorrow'
// or 'yesterday' in a string constant gets a twin of its own for each
// Parse (upstreamstmt.go); others are shared.
func TestMayReadParseTime(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT 'now'::timestamptz":                                true,
		"SELECT 'Today'::date":                                     true,
		"SELECT ' TOMORROW '::date":                                true,
		"SELECT '{yesterday}'::date[]":                             true,
		"SELECT E'a\\' now'::text":                                 true,
		"SELECT 'it''s now'":                                       true,
		"SELECT date'a\\', 'now'":                                  true, // not an E'' string: its backslash ends nothing
		"SELECT $x$now$x$::date":                                   true,
		"SELECT now(), today FROM t WHERE \"now\" = $1":            false,
		"SELECT 'north' FROM t WHERE x = 'nowhere' OR y = $1":      true, // a false positive: a Parse more
		"SELECT '2024-01-02'::date, 'epoch'::timestamp, \"x'now\"": false,
	} {
		if got := mayReadParseTime(sql); got != want {
			t.Errorf("mayReadParseTime(%q) = %v, want %v", sql, got, want)
		}
	}
}
