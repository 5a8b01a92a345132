package proxy

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/rewrite"
)

// SQLSTATE codes the proxy itself raises. The README lists them; rewrite,
// budget and scram errors carry their own via a SQLState method.
const (
	codeUnsupported      = "0A000"
	codeForbidden        = "42501"
	codeInvalidParameter = "22023"
	codeCanceled         = "57014"
	codeAdminShutdown    = "57P01"
	codeUpstreamDown     = "08006"
	codeProtocol         = "08P01"
	codeAuthFailed       = "28P01"
	codeInvalidAuthSpec  = "28000"
	codeInternal         = "XX000"
)

// Error is an error raised by the proxy with a SQLSTATE and a message that
// is safe to show to the client.
type Error struct {
	Code    string
	Message string
	Detail  string
	Hint    string
	// cause is logged, never sent.
	cause error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Message + ": " + e.cause.Error()
	}
	return e.Message
}

// SQLState implements the interface the error mapping looks for.
func (e *Error) SQLState() string { return e.Code }

func (e *Error) Unwrap() error { return e.cause }

// privateFailed is the one error a client gets when a private query
// fails in the database after its charge, whatever happened: a type
// error, a timeout, a cancel, a lost connection. Which of these it was can
// depend on the private rows (a value that fails a cast, a person whose
// rows make the query slow), so the code and the text are always the
// same; the operator's log keeps the cause.
func privateFailed(cause error) *Error {
	return &Error{Code: codePrivateFailed, Message: privateFailedMessage, cause: cause}
}

const (
	codePrivateFailed    = codeInternal
	privateFailedMessage = "the database could not complete this DP query; the charge is kept"
)

func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// sqlStater is implemented by every client-facing error of this module
// (rewrite.RejectError, budget errors, scram errors, *Error).
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
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: codeInternal, Message: "internal error in dpproxy (details are in the proxy log)"}
	}
	switch e := s.(type) {
	case *pgconn.PgError:
		return &pgproto3.ErrorResponse{
			Severity: e.Severity, SeverityUnlocalized: e.Severity,
			Code: e.Code, Message: e.Message, Detail: e.Detail, Hint: e.Hint,
			// No Position: PostgreSQL ran the proxy's deparse, not the
			// client's text, so its offsets point elsewhere in the latter.
		}
	case *rewrite.RejectError:
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: e.Code,
			Message: e.Message, Detail: e.Detail, Hint: e.Hint, Position: e.Position}
	case *Error:
		return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: e.Code,
			Message: e.Message, Detail: e.Detail, Hint: e.Hint}
	}
	// Every other error type with a SQLState keeps its Error() text safe
	// for clients (budget.UnavailableError, for one, keeps its cause apart).
	return &pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: s.SQLState(), Message: err.Error()}
}

func fatalResponse(code, msg string) *pgproto3.ErrorResponse {
	return &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg}
}
