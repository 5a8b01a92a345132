package proxy

import (
	"context"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// SET, RESET and SHOW of the session's dp.* settings, which the proxy
// keeps itself; the upstream session's settings are settings.go's.

// setDP applies SET/RESET dp.<name>. Values are checked here because their
// limits come from the configuration.
func (ss *session) setDP(st *rewrite.Statement) (*result, error) {
	p := ss.srv.cfg.Privacy
	set := st.Setting
	v := strings.TrimSpace(set.Value)
	switch set.Name {
	case "epsilon":
		if set.Reset {
			ss.epsilon = p.Epsilon
			break
		}
		eps, err := strconv.ParseFloat(v, 64)
		if err != nil || !conf.ValidEpsilon(eps) {
			return nil, refuse(pgerr.InvalidParameterValue, "invalid value for dp.epsilon: %q: it must be a finite number > 0", v)
		}
		if eps > p.MaxEpsilonPerQuery {
			return nil, refuse(pgerr.InvalidParameterValue, "dp.epsilon = %v exceeds the maximum of %v per query set by the operator (privacy.max_epsilon_per_query)", eps, p.MaxEpsilonPerQuery)
		}
		ss.epsilon = eps
	case "delta":
		if set.Reset {
			ss.delta = p.Delta
			break
		}
		d, err := strconv.ParseFloat(v, 64)
		if err != nil || !conf.ValidDelta(d) || d == 0 {
			return nil, refuse(pgerr.InvalidParameterValue, "invalid value for dp.delta: %q: it must lie in (0, 1)", v)
		}
		ss.delta = d
	case "mechanism":
		if set.Reset {
			ss.mechanism = p.Mechanism
			break
		}
		m := strings.ToLower(v)
		if m != conf.Laplace && m != conf.Gaussian {
			return nil, refuse(pgerr.InvalidParameterValue, "invalid value for dp.mechanism: %q: use laplace or gaussian", v)
		}
		ss.mechanism = m
	case "notices":
		if set.Reset {
			ss.notices = true
			break
		}
		b, ok := parseBool(v)
		if !ok {
			return nil, refuse(pgerr.InvalidParameterValue, "invalid value for dp.notices: %q: use on or off", v)
		}
		ss.notices = b
	case "budget":
		return nil, refuse(pgerr.InsufficientPrivilege, "dp.budget cannot be set: it is kept by the ledger")
	default:
		return nil, refuse(pgerr.InvalidParameterValue, "unrecognized configuration parameter \"dp.%s\" (known: dp.epsilon, dp.delta, dp.mechanism, dp.notices, dp.budget)", set.Name)
	}
	if set.Reset {
		return &result{tag: "RESET"}, nil
	}
	return &result{tag: "SET"}, nil
}

func parseBool(v string) (bool, bool) {
	switch strings.ToLower(strings.Trim(v, "'")) {
	case "on", "true", "yes", "1":
		return true, true
	case "off", "false", "no", "0":
		return false, true
	}
	return false, false
}

func (ss *session) showDP(ctx context.Context, st *rewrite.Statement) (*result, error) {
	var cols []string
	var oids []uint32
	var vals []string
	switch st.Setting.Name {
	case "budget":
		sp, err := ss.srv.ledger.Spent(ctx, ss.user.Name)
		if err != nil {
			return nil, err
		}
		cols = []string{"epsilon_spent", "epsilon_remaining", "delta_spent", "delta_remaining"}
		oids = []uint32{oidNumeric, oidNumeric, oidNumeric, oidNumeric}
		vals = []string{formatNum(sp.EpsilonSpent), formatNum(sp.EpsilonRemaining()), formatNum(sp.DeltaSpent), formatNum(sp.DeltaRemaining())}
		if len(ss.srv.ledger.ConfiguredTables()) > 0 {
			return ss.showBudgetWithTables(ctx, cols, oids, vals) // tables.go
		}
	case "epsilon":
		cols, oids, vals = []string{"dp.epsilon"}, []uint32{oidText}, []string{formatNum(ss.epsilon)}
	case "delta":
		cols, oids, vals = []string{"dp.delta"}, []uint32{oidText}, []string{formatNum(ss.delta)}
	case "mechanism":
		cols, oids, vals = []string{"dp.mechanism"}, []uint32{oidText}, []string{ss.mechanism}
	case "notices":
		v := "on"
		if !ss.notices {
			v = "off"
		}
		cols, oids, vals = []string{"dp.notices"}, []uint32{oidText}, []string{v}
	case "max_epsilon_per_query":
		cols, oids, vals = []string{"dp.max_epsilon_per_query"}, []uint32{oidText}, []string{formatNum(ss.srv.cfg.Privacy.MaxEpsilonPerQuery)}
	default:
		return nil, refuse(pgerr.InvalidParameterValue, "unrecognized configuration parameter \"dp.%s\" (known: dp.epsilon, dp.delta, dp.mechanism, dp.notices, dp.budget)", st.Setting.Name)
	}
	return textResult(cols, oids, [][]string{vals}, "SHOW"), nil
}
