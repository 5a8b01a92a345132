// Package pgerr is dpproxy's one vocabulary of errors for clients: the
// SQLSTATE codes it raises, as typed constants in one table (like
// cockroach's pgwire/pgcode), and Error, the one error type whose text is
// safe to send to a client.
//
// Every package raises its client-facing errors as *Error (or as a type
// with a SQLState method, for errors that carry more, such as the
// budget's): no other package writes a literal SQLSTATE. Whether an error
// is a refusal (the proxy declined the statement before running anything
// private: nothing was charged) or a failure (something broke) is decided
// by Error.Refusal, set where the error is raised, never by reading the
// code's class.
package pgerr

import (
	"errors"
	"fmt"
)

// Code is a SQLSTATE (PostgreSQL documentation, Appendix A).
type Code string

// The SQLSTATEs dpproxy raises itself. Errors of pass-through statements
// reach the client with PostgreSQL's own code, which need not be here.
const (
	SuccessfulCompletion Code = "00000" // successful_completion (NOTICE)

	FeatureNotSupported Code = "0A000" // feature_not_supported

	ConnectionFailure Code = "08006" // connection_failure
	ProtocolViolation Code = "08P01" // protocol_violation

	InvalidParameterValue      Code = "22023" // invalid_parameter_value
	InvalidRowCountInLimit     Code = "2201W" // invalid_row_count_in_limit_clause
	InvalidRowCountInOffset    Code = "2201X" // invalid_row_count_in_result_offset_clause
	InFailedSQLTransaction     Code = "25P02" // in_failed_sql_transaction
	InvalidSQLStatementName    Code = "26000" // invalid_sql_statement_name
	InvalidAuthSpecification   Code = "28000" // invalid_authorization_specification
	InvalidPassword            Code = "28P01" // invalid_password
	InvalidCursorName          Code = "34000" // invalid_cursor_name
	InvalidCatalogName         Code = "3D000" // invalid_catalog_name
	InsufficientPrivilege      Code = "42501" // insufficient_privilege
	SyntaxError                Code = "42601" // syntax_error
	AmbiguousColumn            Code = "42702" // ambiguous_column
	UndefinedColumn            Code = "42703" // undefined_column
	DuplicatePreparedStatement Code = "42P05" // duplicate_prepared_statement
	InvalidColumnReference     Code = "42P10" // invalid_column_reference

	TooManyConnections Code = "53300" // too_many_connections
	// BudgetExhausted is PostgreSQL's configuration_limit_exceeded, the
	// code dpproxy gives a charge the analyst's budget cannot pay.
	BudgetExhausted      Code = "53400"
	ProgramLimitExceeded Code = "54000" // program_limit_exceeded
	StatementTooComplex  Code = "54001" // statement_too_complex

	QueryCanceled      Code = "57014" // query_canceled
	AdminShutdown      Code = "57P01" // admin_shutdown
	IdleSessionTimeout Code = "57P05" // idle_session_timeout

	InternalError Code = "XX000" // internal_error
)

// Error is an error whose fields are safe to send to a client: they never
// hold data read from a table, only parts of the query, the configuration
// and the proxy's own figures. Cause, when set, is for the operator's log
// and is never sent.
type Error struct {
	Code    Code
	Message string
	Detail  string
	Hint    string
	// Position is the 1-based character offset of the offending part of
	// the query string, or 0 when unknown.
	Position int32
	// Refusal is set when the proxy declined the statement before running
	// anything private (an unsupported query, a bad setting, a limit):
	// nothing was charged and the client may change the query. Unset, the
	// error is a failure.
	Refusal bool
	Cause   error
}

// Refuse builds a refusal.
func Refuse(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Refusal: true}
}

// Fail builds a failure; cause (may be nil) goes to the log only.
func Fail(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Cause: cause}
}

// Error implements error. It includes the cause, for logs.
func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

// SQLState returns the code as a string, the interface through which
// errors that carry a SQLSTATE are recognised (pgconn's PgError has it too).
func (e *Error) SQLState() string { return string(e.Code) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// WithHint sets the hint and returns e.
func (e *Error) WithHint(format string, args ...any) *Error {
	e.Hint = fmt.Sprintf(format, args...)
	return e
}

// WithDetail sets the detail and returns e.
func (e *Error) WithDetail(format string, args ...any) *Error {
	e.Detail = fmt.Sprintf(format, args...)
	return e
}

// Refuser is implemented by errors of other types that are refusals (the
// budget's: a charge the budget cannot pay is refused, not failed).
type Refuser interface{ Refused() bool }

// IsRefusal reports whether the outermost error in err's chain that says
// so is a refusal: an *Error with Refusal set, or a Refuser returning true.
func IsRefusal(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch x := e.(type) {
		case *Error:
			return x.Refusal
		case Refuser:
			return x.Refused()
		}
	}
	return false
}
