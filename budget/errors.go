package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// ExhaustedError refuses a charge that would exceed the analyst's budget.
// Nothing was recorded.
type ExhaustedError struct {
	Requested Charge
	// Remaining is the analyst's budget as the refusal found it.
	Remaining Spend
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("privacy budget exceeded: this query needs ε=%v, δ=%v; remaining ε=%v, δ=%v",
		e.Requested.Epsilon, e.Requested.Delta, e.Remaining.EpsilonRemaining(), e.Remaining.DeltaRemaining())
}

// SQLState is configuration_limit_exceeded (pgerr.BudgetExhausted).
func (e *ExhaustedError) SQLState() string { return string(pgerr.BudgetExhausted) }

// Refused is true: the charge was refused, nothing ran.
func (e *ExhaustedError) Refused() bool { return true }

// UnavailableError means the ledger could not be read or written, so the
// query must not run. Error is safe to show clients; the cause, which may
// name hosts, is in Err and in LogValue for logs.
//
// It has no Unwrap method on purpose: errors.As must not find the cause's
// *pgconn.PgError (a ledger failure such as a constraint violation), which
// the proxy would pass on to the client verbatim. errors.Is still sees the
// cause (context.Canceled, for one) through Is.
type UnavailableError struct {
	Err error
}

func unavailable(err error) error { return &UnavailableError{Err: err} }

func (e *UnavailableError) Error() string {
	if e.canceled() {
		return "canceling statement due to user request: nothing was run"
	}
	return "privacy budget ledger unavailable: nothing was run"
}

// Is reports whether the cause is target, so that errors.Is(err,
// context.Canceled) holds for a canceled ledger call.
func (e *UnavailableError) Is(target error) bool { return errors.Is(e.Err, target) }

// SQLState is connection_failure, or query_canceled when the caller's
// context was canceled.
func (e *UnavailableError) SQLState() string {
	if e.canceled() {
		return string(pgerr.QueryCanceled)
	}
	return string(pgerr.ConnectionFailure)
}

func (e *UnavailableError) canceled() bool { return errors.Is(e.Err, context.Canceled) }

// LogValue implements slog.LogValuer: the client message and the cause.
func (e *UnavailableError) LogValue() slog.Value {
	cause := "<nil>"
	if e.Err != nil {
		cause = e.Err.Error()
	}
	return slog.GroupValue(slog.String("msg", e.Error()), slog.String("cause", cause))
}

// UnknownAnalystError means the ledger has no budget for the analyst (not
// configured, or the configuration changed without Open).
type UnknownAnalystError struct {
	Analyst string
}

func (e *UnknownAnalystError) Error() string {
	return fmt.Sprintf("no privacy budget for analyst %q", e.Analyst)
}

// SQLState is insufficient_privilege.
func (e *UnknownAnalystError) SQLState() string { return string(pgerr.InsufficientPrivilege) }

// Refused is true: the analyst has no budget, nothing ran.
func (e *UnknownAnalystError) Refused() bool { return true }

// InvalidChargeError rejects an ε or δ that is not finite or out of range.
type InvalidChargeError struct {
	Reason string
}

func (e *InvalidChargeError) Error() string { return "invalid privacy charge: " + e.Reason }

// SQLState is invalid_parameter_value.
func (e *InvalidChargeError) SQLState() string { return string(pgerr.InvalidParameterValue) }

// Refused is true: the charge was not recorded and nothing ran.
func (e *InvalidChargeError) Refused() bool { return true }
