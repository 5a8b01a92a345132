package proxy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// TestClassifyByType: the metrics' outcome is decided by the error's type
// (a refusal: the proxy declined before running anything private), not by
// its code's class: a 54001 of the guard is a refusal, a 42501 the
// database raised on a pass-through statement is a failure, and a
// constant the database could not evaluate before the charge is a refusal
// that keeps the database's code.
func TestClassifyByType(t *testing.T) {
	upstream := &pgconn.PgError{Code: "22012", Message: "division by zero"}
	for _, c := range []struct {
		name          string
		err           error
		outcome, code string
	}{
		{"answered", nil, outcomeAnswered, ""},
		{"guard", fmt.Errorf("analyse: %w", &rewrite.RejectError{Code: pgerr.StatementTooComplex, Refusal: true}), outcomeRefused, "54001"},
		{"rewrite", pgerr.Refuse(pgerr.InsufficientPrivilege, "SELECT * would return rows"), outcomeRefused, "42501"},
		{"budget", &budget.ExhaustedError{}, outcomeRefused, "53400"},
		{"unknown analyst", &budget.UnknownAnalystError{Analyst: "x"}, outcomeRefused, "42501"},
		{"ledger down", &budget.UnavailableError{Err: errors.New("dial")}, outcomeFailed, "08006"},
		{"pass-through", &pgconn.PgError{Code: "42501", Message: "permission denied"}, outcomeFailed, "42501"},
		{"constants before the charge", &Error{Code: pgerr.Code(upstream.Code), Refusal: true, Message: upstream.Message, Cause: upstream}, outcomeRefused, "22012"},
		{"after the charge", privateFailed(upstream), outcomeFailed, "22012"},
		{"aborted transaction", refuse(pgerr.InFailedSQLTransaction, "aborted"), outcomeRefused, "25P02"},
		{"cancel", fail(pgerr.QueryCanceled, "canceling"), outcomeFailed, "57014"},
		{"bug", errors.New("index out of range"), outcomeFailed, "XX000"},
	} {
		if outcome, code := classify(c.err); outcome != c.outcome || code != c.code {
			t.Errorf("%s: classify = %s %s, want %s %s", c.name, outcome, code, c.outcome, c.code)
		}
	}
}
