package proxy

import (
	"errors"
	"testing"
	"time"
)

// Helpers of the tests of the limits (admission, slots, analysis, the
// watcher of clients gone).

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	for range 100 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error(msg)
}

func hasCode(err error, code string) bool {
	var s sqlStater
	return errors.As(err, &s) && s.SQLState() == code
}
