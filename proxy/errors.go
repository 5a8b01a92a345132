package proxy

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Error is the proxy's client-safe error: pgerr's, the one error type of
// the module (internal/pgerr), whose codes are a typed table there.
type Error = pgerr.Error

// refuse is a refusal: the proxy declined the statement before running
// anything private; nothing was charged.
func refuse(code pgerr.Code, format string, args ...any) *Error {
	return pgerr.Refuse(code, format, args...)
}

// fail is a failure of the proxy or the database.
func fail(code pgerr.Code, format string, args ...any) *Error {
	return pgerr.Fail(code, nil, format, args...)
}

// privateFailed is the one error a client gets when a private query
// fails in the database after its charge, whatever happened: a type
// error, a timeout, a cancel, a lost connection. Which of these it was can
// depend on the private rows (a value that fails a cast, a person whose
// rows make the query slow), so the code and the text are always the
// same; the operator's log keeps the cause.
func privateFailed(cause error) *Error {
	return &Error{Code: pgerr.InternalError, Message: privateFailedMessage, Cause: cause}
}

const privateFailedMessage = "the database could not complete this DP query; the charge is kept"

// sqlStater is implemented by every client-facing error of this module
// (*Error, which rewrite.RejectError is, and the budget's errors).
type sqlStater interface{ SQLState() string }

// errorResponse maps any error to an ErrorResponse. The outermost error in
// the chain that carries a SQLSTATE decides: an upstream *pgconn.PgError
// reaches the client as PostgreSQL raised it only when nothing of the
// proxy's wraps it (a pass-through statement, which reads no private
// table); when the proxy wrapped it (a private query that failed in the
// database, a ledger write), the proxy's own code and message are sent and
// the upstream text, which could quote a private value, goes to the log
// only. Errors without a SQLSTATE are internal: the client gets XX000 and a
// generic text; the caller logs the full error.
func errorResponse(err error) *pgproto3.ErrorResponse {
	var s sqlStater
	if !errors.As(err, &s) {
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: string(pgerr.InternalError), Message: "internal error in dpproxy (details are in the proxy log)"}
	}
	switch e := s.(type) {
	case *pgconn.PgError:
		sev := e.Severity
		if sev == "FATAL" || sev == "PANIC" {
			// The upstream connection ended, not the client's session,
			// which goes on on a new backend (replicas.go, keepUpstream):
			// a client told FATAL would drop its connection.
			sev = "ERROR"
		}
		return &pgproto3.ErrorResponse{
			Severity: sev, SeverityUnlocalized: sev,
			Code: e.Code, Message: e.Message, Detail: e.Detail, Hint: e.Hint,
			// No Position: PostgreSQL ran the proxy's deparse, not the
			// client's text, so its offsets point elsewhere in the latter.
		}
	case *Error: // the rewrite's refusals (rewrite.RejectError) too
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: string(e.Code),
			Message: e.Message, Detail: e.Detail, Hint: e.Hint, Position: e.Position}
	}
	// Every other error type with a SQLState keeps its Error() text safe
	// for clients (budget.UnavailableError, for one, keeps its cause apart).
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: s.SQLState(), Message: err.Error()}
}

func fatalResponse(code pgerr.Code, msg string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: string(code), Message: msg}
}
