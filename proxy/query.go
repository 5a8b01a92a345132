package proxy

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Type OIDs the proxy encodes itself.
const (
	oidBool    = 16
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidFloat4  = 700
	oidFloat8  = 701
	oidNumeric = 1700
)

// simpleQuery answers one Query message: every statement is analysed first,
// so a string mixing allowed and refused parts runs nothing.
func (ss *session) simpleQuery(sql string) {
	defer func() { ss.send(&pgproto3.ReadyForQuery{TxStatus: ss.txStatus()}) }()
	stmts, err := ss.srv.analyzer.Analyze(sql)
	if err != nil {
		ss.log.Warn("query refused", "err", err)
		ss.send(errorResponse(err))
		return
	}
	ctx := context.Background()
	for _, st := range stmts {
		if err := ss.run(ctx, st); err != nil {
			ss.sendError(err)
			return
		}
	}
}

func (ss *session) sendError(err error) {
	var s sqlStater
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		ss.log.Info("upstream error", "code", pgErr.Code)
	case errors.As(err, &s):
		ss.log.Warn("query failed", "code", s.SQLState(), "err", err)
	default:
		ss.log.Error("internal error", "err", err)
	}
	ss.send(errorResponse(err))
}

func (ss *session) run(ctx context.Context, st *rewrite.Statement) error {
	switch st.Kind {
	case rewrite.KindEmpty:
		ss.send(&pgproto3.EmptyQueryResponse{})
		return nil
	case rewrite.KindSetDP:
		return ss.setDP(st)
	case rewrite.KindShowDP:
		return ss.showDP(ctx, st)
	case rewrite.KindPassThrough:
		return ss.passThrough(ctx, st.SQL)
	case rewrite.KindPrivate:
		return ss.private(ctx, st)
	case rewrite.KindExplainDP:
		return ss.explainDP(ctx, st)
	}
	return newError(codeInternal, "unknown statement kind %d", st.Kind)
}

// passThrough forwards a validated statement that reads no private table
// and relays its results unchanged.
func (ss *session) passThrough(ctx context.Context, sql string) error {
	pc := ss.upstream.Conn().PgConn()
	mrr := pc.Exec(ctx, sql)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		if fds := rr.FieldDescriptions(); len(fds) > 0 {
			ss.send(rowDescription(fds))
		}
		n := 0
		for rr.NextRow() {
			ss.send(&pgproto3.DataRow{Values: rr.Values()})
			if n++; n%1024 == 0 {
				if err := ss.flush(); err != nil {
					rr.Close()
					mrr.Close()
					return err
				}
			}
		}
		tag, err := rr.Close()
		if err != nil {
			mrr.Close()
			return err
		}
		ss.send(&pgproto3.CommandComplete{CommandTag: []byte(tag.String())})
	}
	err := mrr.Close()
	ss.sendParameterChanges(false)
	return err
}

func rowDescription(fds []pgconn.FieldDescription) *pgproto3.RowDescription {
	rd := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(fds))}
	for i, f := range fds {
		rd.Fields[i] = pgproto3.FieldDescription{
			Name: []byte(f.Name), TableOID: f.TableOID, TableAttributeNumber: f.TableAttributeNumber,
			DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format,
		}
	}
	return rd
}

// setDP applies SET/RESET dp.<name>. Values are checked here because their
// limits come from the configuration.
func (ss *session) setDP(st *rewrite.Statement) error {
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
			return newError(codeInvalidParameter, "invalid value for dp.epsilon: %q: it must be a finite number > 0", v)
		}
		if eps > p.MaxEpsilonPerQuery {
			return newError(codeInvalidParameter, "dp.epsilon = %v exceeds the maximum of %v per query set by the operator (privacy.max_epsilon_per_query)", eps, p.MaxEpsilonPerQuery)
		}
		ss.epsilon = eps
	case "delta":
		if set.Reset {
			ss.delta = p.Delta
			break
		}
		d, err := strconv.ParseFloat(v, 64)
		if err != nil || !conf.ValidDelta(d) || d == 0 {
			return newError(codeInvalidParameter, "invalid value for dp.delta: %q: it must lie in (0, 1)", v)
		}
		ss.delta = d
	case "mechanism":
		if set.Reset {
			ss.mechanism = p.Mechanism
			break
		}
		m := strings.ToLower(v)
		if m != conf.Laplace && m != conf.Gaussian {
			return newError(codeInvalidParameter, "invalid value for dp.mechanism: %q: use laplace or gaussian", v)
		}
		ss.mechanism = m
	case "notices":
		if set.Reset {
			ss.notices = true
			break
		}
		b, ok := parseBool(v)
		if !ok {
			return newError(codeInvalidParameter, "invalid value for dp.notices: %q: use on or off", v)
		}
		ss.notices = b
	case "budget":
		return newError(codeForbidden, "dp.budget cannot be set: it is kept by the ledger")
	default:
		return newError(codeInvalidParameter, "unrecognized configuration parameter \"dp.%s\" (known: dp.epsilon, dp.delta, dp.mechanism, dp.notices, dp.budget)", set.Name)
	}
	tag := "SET"
	if set.Reset {
		tag = "RESET"
	}
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	return nil
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

func (ss *session) showDP(ctx context.Context, st *rewrite.Statement) error {
	var cols []string
	var oids []uint32
	var vals []string
	switch st.Setting.Name {
	case "budget":
		sp, err := ss.srv.ledger.Spent(ctx, ss.user.Name)
		if err != nil {
			return err
		}
		cols = []string{"epsilon_spent", "epsilon_remaining", "delta_spent", "delta_remaining"}
		oids = []uint32{oidNumeric, oidNumeric, oidNumeric, oidNumeric}
		vals = []string{formatNum(sp.EpsilonSpent), formatNum(sp.EpsilonRemaining()), formatNum(sp.DeltaSpent), formatNum(sp.DeltaRemaining())}
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
		return newError(codeInvalidParameter, "unrecognized configuration parameter \"dp.%s\" (known: dp.epsilon, dp.delta, dp.mechanism, dp.notices, dp.budget)", st.Setting.Name)
	}
	ss.sendRows(cols, oids, [][]string{vals}, "SHOW")
	return nil
}

// sendRows sends a small text result the proxy made itself.
func (ss *session) sendRows(cols []string, oids []uint32, rows [][]string, tag string) {
	rd := &pgproto3.RowDescription{}
	for i, c := range cols {
		rd.Fields = append(rd.Fields, pgproto3.FieldDescription{Name: []byte(c), DataTypeOID: oids[i], DataTypeSize: typeSize(oids[i]), TypeModifier: -1})
	}
	ss.send(rd)
	for _, r := range rows {
		dr := &pgproto3.DataRow{Values: make([][]byte, len(r))}
		for i, v := range r {
			dr.Values[i] = []byte(v)
		}
		ss.send(dr)
	}
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
}

func typeSize(oid uint32) int16 {
	switch oid {
	case oidInt8, oidFloat8:
		return 8
	case oidInt4, oidFloat4:
		return 4
	case oidInt2:
		return 2
	case oidBool:
		return 1
	}
	return -1
}

// formatNum prints a float as PostgreSQL prints numeric: plain decimal,
// never an exponent, with the shortest digits that round-trip.
func formatNum(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
