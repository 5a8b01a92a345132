package proxy

import (
	"errors"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
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

func hasCode(err error, code pgerr.Code) bool {
	var s sqlStater
	return errors.As(err, &s) && s.SQLState() == string(code)
}
