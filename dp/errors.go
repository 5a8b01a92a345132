package dp

import "fmt"

// SQLSTATE codes of this package's errors.
const (
	codeInvalidParameter = "22023"
	codeInternal         = "XX000"
)

// Error is an error of the release with a SQLSTATE and a message that is
// safe to show to the client.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// SQLState is the error's SQLSTATE.
func (e *Error) SQLState() string { return e.Code }

func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
