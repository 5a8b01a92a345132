package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestErrorResponseMapsEveryErrorType checks that each client-facing error
// type of the module reaches the client with its SQLSTATE and a safe text,
// and that anything else becomes XX000 without its details.
func TestErrorResponseMapsEveryErrorType(t *testing.T) {
	_, noiseErr := noise.Laplace().Add(0, 1, 1, -1, 0)
	cases := []struct {
		name    string
		err     error
		code    string
		message string // substring the client sees
		hidden  string // substring the client must not see
	}{
		{"reject", &rewrite.RejectError{Code: "42501", Message: "SELECT * would return rows", Hint: "aggregate"}, "42501", "SELECT * would return rows", "rewrite:"},
		{"wrapped reject", fmt.Errorf("analyse: %w", &rewrite.RejectError{Code: "0A000", Message: "joins"}), "0A000", "joins", "analyse"},
		{"exhausted", &budget.ExhaustedError{Requested: budget.Charge{Epsilon: 1}}, "53400", "remaining", ""},
		{"ledger down", &budget.UnavailableError{Err: errors.New("dial tcp 10.0.0.1: secret-host")}, "08006", "nothing was run", "secret-host"},
		{"noise parameter", noiseErr, "22023", "", ""},
		{"proxy error", &Error{Code: pgerr.InternalError, Message: "the database failed", Cause: errors.New("value 4711 out of range")}, "XX000", "the database failed", "4711"},
		{"pass-through upstream", &pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, "42P01", "relation does not exist", ""},
		{"internal", errors.New("index out of range: row 4711"), "XX000", "internal error", "4711"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatal("test setup: nil error")
			}
			r := errorResponse(c.err)
			if r.Code != c.code {
				t.Errorf("errorResponse(%v).Code = %s, want %s", c.err, r.Code, c.code)
			}
			text := r.Message + " " + r.Detail + " " + r.Hint
			if r.Message == "" || !strings.Contains(text, c.message) {
				t.Errorf("message %q lacks %q", text, c.message)
			}
			if c.hidden != "" && strings.Contains(text, c.hidden) {
				t.Errorf("message %q reveals %q", text, c.hidden)
			}
		})
	}
}

// TestOutermostErrorDecides: when the proxy wraps an upstream error in
// its own (a private query that failed in the database, a ledger write
// that failed), the client gets the proxy's code and message, never the
// upstream's text, which can quote a private value. Only an upstream
// error the proxy passes on unwrapped (a pass-through statement) is
// forwarded as PostgreSQL raised it.
func TestOutermostErrorDecides(t *testing.T) {
	up := &pgconn.PgError{Severity: "ERROR", Code: "22007", Message: `invalid input syntax for type date: "secret-42"`, Detail: "secret detail"}
	wrapped := &Error{Code: pgerr.InternalError, Message: "the database could not complete this DP query; the charge is kept", Cause: up}
	for _, err := range []error{wrapped, fmt.Errorf("running: %w", wrapped)} {
		r := errorResponse(err)
		if r.Code != string(pgerr.InternalError) || strings.Contains(r.Message+r.Detail+r.Hint, "secret") {
			t.Errorf("errorResponse(%v) = %s %q %q: the upstream error leaked through the proxy's", err, r.Code, r.Message, r.Detail)
		}
	}
	if r := errorResponse(fmt.Errorf("pass-through: %w", up)); r.Code != "22007" || r.Message != up.Message {
		t.Errorf("a pass-through upstream error is not forwarded: %s %q", r.Code, r.Message)
	}
}
