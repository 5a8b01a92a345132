package rewrite

import (
	"math"
	"strconv"
	"strings"
	"time"

	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Every upstream connection starts with statement_timeout at
// limits.statement_timeout (proxy/server.go), and clients may SET it, but
// only to a value in (0, limit]: 0 would disable it, a larger one raise it.
// RESET, SET ... TO DEFAULT, RESET ALL and DISCARD ALL restore the limit.

// checkTimeoutSet checks SET [LOCAL] statement_timeout against the limit.
func (a *Analyzer) checkTimeoutSet(n *pg_query.VariableSetStmt) error {
	if !strings.EqualFold(n.Name, "statement_timeout") || n.Kind != pg_query.VariableSetKind_VAR_SET_VALUE {
		return nil
	}
	if len(n.Args) != 1 || n.Args[0].GetAConst() == nil || n.Args[0].GetAConst().Isnull {
		return reject(pgerr.InvalidParameterValue, -1, "SET statement_timeout takes one constant value")
	}
	return CheckStatementTimeout(constString(n.Args[0].GetAConst()), a.cfg.Limits.WithDefaults().StatementTimeout)
}

// CheckStatementTimeout accepts a client's value for statement_timeout (by
// SET or as a startup parameter) only if PostgreSQL would read it as a
// duration in (0, limit]. A value it cannot read as PostgreSQL does (a
// hexadecimal number, an unknown unit) is refused too, so that no
// spelling can mean 0 or more to PostgreSQL than to the proxy.
func CheckStatementTimeout(value string, limit time.Duration) error {
	limitMS := limit.Milliseconds()
	ms, ok := parseTimeoutMS(value)
	switch {
	case !ok:
		return reject(pgerr.InvalidParameterValue, -1, "invalid value for statement_timeout: %q", value).
			WithHint("Give milliseconds, or a number with a unit (us, ms, s, min, h, d).")
	case ms <= 0:
		return reject(pgerr.InvalidParameterValue, -1, "statement_timeout %q would disable the time limit: dpproxy bounds every statement by %d ms (limits.statement_timeout)", value, limitMS)
	case ms > float64(limitMS):
		return reject(pgerr.InvalidParameterValue, -1, "statement_timeout %q exceeds dpproxy's limit of %d ms (limits.statement_timeout)", value, limitMS)
	}
	return nil
}

// timeUnits are PostgreSQL's units of time settings, in milliseconds
// (statement_timeout's base unit); unit names are case-sensitive.
var timeUnits = map[string]float64{"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}

// parseTimeoutMS reads a statement_timeout value as PostgreSQL does
// (parse_int: a decimal number, optionally with a fraction and exponent,
// then an optional unit, spaces around), rounded to whole milliseconds.
// PostgreSQL would read a leading 0 as octal, which is never larger, and
// zero only when this reading is zero too.
func parseTimeoutMS(v string) (float64, bool) {
	s := strings.Trim(v, " \t\n\r\f\v")
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if digits() == 0 {
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	num, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsInf(num, 0) || math.IsNaN(num) {
		return 0, false
	}
	factor := 1.0
	if unit := strings.TrimLeft(s[i:], " \t\n\r\f\v"); unit != "" {
		f, ok := timeUnits[unit]
		if !ok {
			return 0, false
		}
		factor = f
	}
	return math.RoundToEven(num * factor), true
}
