package rewrite

import (
	"errors"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

func TestCheckStatementTimeout(t *testing.T) {
	const limit = time.Minute
	ok := []string{"1", "5000", "60000", " 1500 ", "1.5s", "1s", "1 s", "60 s", "1min", "0.5min", "1e3", "2500us", "0.6", "+10"}
	bad := []string{"0", "-1", "0.4", "0us", "60001", "61s", "2min", "1h", "1d", "1e9", "0x10", "0x0", "10 S", "1 sec", "", "on", "1.5.2", "inf", "NaN", "-0"}
	for _, v := range ok {
		if err := CheckStatementTimeout(v, limit); err != nil {
			t.Errorf("CheckStatementTimeout(%q) = %v, want nil", v, err)
		}
	}
	for _, v := range bad {
		err := CheckStatementTimeout(v, limit)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != pgerr.InvalidParameterValue {
			t.Errorf("CheckStatementTimeout(%q) = %v, want 22023", v, err)
		}
	}
}

// TestSetStatementTimeout: SET and SET LOCAL of statement_timeout are
// checked against limits.statement_timeout (1m by default); RESET and
// DEFAULT restore the pinned limit and pass.
func TestSetStatementTimeout(t *testing.T) {
	a := newTestAnalyzer(t)
	for _, sql := range []string{"SET statement_timeout = 5000", "SET LOCAL statement_timeout TO '30s'", "SET statement_timeout = 1.5",
		"RESET statement_timeout", "SET statement_timeout TO DEFAULT", "RESET ALL", "SET SESSION statement_timeout = '1min'"} {
		if _, err := a.Analyze(sql); err != nil {
			t.Errorf("Analyze(%q) = %v, want accepted", sql, err)
		}
	}
	for _, sql := range []string{"SET statement_timeout = 0", "SET statement_timeout = '0'", "SET LOCAL statement_timeout = '2min'",
		"SET statement_timeout = 600000", "SET statement_timeout TO '0x0'", "set STATEMENT_TIMEOUT = -1", "SET statement_timeout = 1, 2",
		"BEGIN; SET LOCAL statement_timeout = 0; SELECT 1; COMMIT"} {
		_, err := a.Analyze(sql)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != pgerr.InvalidParameterValue {
			t.Errorf("Analyze(%q) = %v, want 22023", sql, err)
		}
	}
}
