package rewrite

import "github.com/dpproxy/dpproxy/internal/pgerr"

// RejectError is a refusal of a statement: pgerr's one client-safe error
// type, with Refusal set. It carries the SQLSTATE (a pgerr code) and the
// fields of the ErrorResponse sent to the client; its texts never contain
// data read from a table, only parts of the query and the configuration.
// Its Position is the 1-based character offset of the offending part of
// the query string, or 0 when unknown.
type RejectError = pgerr.Error

// reject builds a refusal; loc is a node location in the parsed text
// (-1 when unknown), translated by the caller's context.
func reject(code pgerr.Code, loc int32, format string, args ...any) *RejectError {
	e := pgerr.Refuse(code, format, args...)
	e.Position = loc
	return e
}
