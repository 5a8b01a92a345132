package dp

import "github.com/dpproxy/dpproxy/internal/pgerr"

// refuse is an error of the privacy parameters, found before the charge:
// the query is refused (22023) and costs nothing.
func refuse(format string, args ...any) *pgerr.Error {
	return pgerr.Refuse(pgerr.InvalidParameterValue, format, args...)
}

// internal is a plan that does not fit its aggregate (a bug of the
// rewriter) or rows that do not fit the plan: a failure (XX000).
func internal(format string, args ...any) *pgerr.Error {
	return pgerr.Fail(pgerr.InternalError, nil, format, args...)
}
