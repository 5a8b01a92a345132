package rewrite

import "fmt"

// SQLSTATE codes used by the rewrite. The proxy maps any error with a
// SQLState method to an ErrorResponse carrying that code.
const (
	CodeSyntax       = "42601" // syntax_error
	CodeUnsupported  = "0A000" // feature_not_supported
	CodeForbidden    = "42501" // insufficient_privilege
	CodeBadColumnRef = "42703" // undefined_column
	CodeAmbiguous    = "42702" // ambiguous_column
	CodeBadPosition  = "42P10" // invalid_column_reference
	CodeBadLimit     = "2201W" // invalid_row_count_in_limit_clause
	CodeBadOffset    = "2201X" // invalid_row_count_in_result_offset_clause
)

// RejectError is a refusal of a statement: it carries the SQLSTATE and the
// fields of the ErrorResponse sent to the client. Its texts never contain
// data read from a table, only parts of the query and the configuration.
type RejectError struct {
	Code    string
	Message string
	Detail  string
	Hint    string
	// Position is the 1-based character offset of the offending part of
	// the query string, or 0 when unknown.
	Position int32
}

// Error implements error.
func (e *RejectError) Error() string {
	return "rewrite: " + e.Message
}

// SQLState returns the SQLSTATE of the refusal.
func (e *RejectError) SQLState() string { return e.Code }

// reject builds a RejectError; loc is a node location in the parsed text
// (-1 when unknown), translated by the caller's context.
func reject(code string, loc int32, format string, args ...any) *RejectError {
	return &RejectError{Code: code, Message: fmt.Sprintf(format, args...), Position: loc}
}

func (e *RejectError) withHint(format string, args ...any) *RejectError {
	e.Hint = fmt.Sprintf(format, args...)
	return e
}

func (e *RejectError) withDetail(format string, args ...any) *RejectError {
	e.Detail = fmt.Sprintf(format, args...)
	return e
}
