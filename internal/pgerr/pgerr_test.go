package pgerr

import (
	"errors"
	"fmt"
	"testing"
)

type budgetRefusal struct{}

func (budgetRefusal) Error() string    { return "budget exhausted" }
func (budgetRefusal) SQLState() string { return string(BudgetExhausted) }
func (budgetRefusal) Refused() bool    { return true }

// TestRefusalByType: whether an error is a refusal is read from its type
// and flag, through wrapping, never from its code's class (a 42501 may be
// a refusal or a failure).
func TestRefusalByType(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{Refuse(FeatureNotSupported, "no"), true},
		{fmt.Errorf("wrapped: %w", Refuse(InsufficientPrivilege, "no")), true},
		{Fail(InsufficientPrivilege, nil, "ledger role"), false},
		{Fail(InternalError, errors.New("boom"), "failed"), false},
		{fmt.Errorf("x: %w", budgetRefusal{}), true},
		{errors.New("plain"), false},
		{nil, false},
		// The outermost error that says decides.
		{Fail(InternalError, Refuse(SyntaxError, "inner"), "outer"), false},
	} {
		if got := IsRefusal(c.err); got != c.want {
			t.Errorf("IsRefusal(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestErrorTextKeepsCauseOutOfMessage(t *testing.T) {
	e := Fail(InternalError, errors.New("secret upstream text"), "the query failed")
	if e.Message != "the query failed" || e.SQLState() != "XX000" {
		t.Errorf("got %q %q", e.Message, e.SQLState())
	}
	if !errors.Is(e, e.Cause) {
		t.Error("cause not unwrapped")
	}
	h := Refuse(FeatureNotSupported, "x %d", 1).WithHint("h %s", "y").WithDetail("d")
	if h.Message != "x 1" || h.Hint != "h y" || h.Detail != "d" {
		t.Errorf("builders: %+v", h)
	}
}
