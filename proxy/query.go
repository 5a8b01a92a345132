package proxy

import (
	"context"
	"errors"
	"fmt"
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
func (ss *session) simpleQuery(ctx context.Context, sql string) {
	defer func() { ss.send(&pgproto3.ReadyForQuery{TxStatus: ss.txStatus()}) }()
	if err := ss.endBatch(ctx); err != nil { // portal.go
		ss.sendError(err)
		return
	}
	stmts, err := ss.analyze(ctx, sql) // analysis.go
	if err != nil {
		ss.observeRefused(refusedText(sql, err), err)
		ss.send(errorResponse(err))
		return
	}
	for _, st := range stmts {
		if err := ss.observed(ctx, st, ss.run); err != nil {
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
		ss.log.Debug("query failed", "code", s.SQLState(), "reason", safeReason(err)) // the error's cause may hold data
	default:
		ss.log.Error("internal error", "err", err)
	}
	ss.send(errorResponse(err))
}

// result is an answer the proxy produced itself (everything but
// pass-through), in text format; the protocol layer sends it.
type result struct {
	fields []pgproto3.FieldDescription // nil: the statement returns no rows
	rows   [][][]byte
	tag    string
	notice string // sent after CommandComplete when set
	empty  bool   // an empty query string
}

// textResult builds a small result from strings.
func textResult(cols []string, oids []uint32, rows [][]string, tag string) *result {
	r := &result{tag: tag}
	for i, c := range cols {
		r.fields = append(r.fields, pgproto3.FieldDescription{Name: []byte(c), DataTypeOID: oids[i], DataTypeSize: typeSize(oids[i]), TypeModifier: -1})
	}
	for _, row := range rows {
		vals := make([][]byte, len(row))
		for i, v := range row {
			vals[i] = []byte(v)
		}
		r.rows = append(r.rows, vals)
	}
	return r
}

// run executes one statement of a simple Query message.
func (ss *session) run(ctx context.Context, st *rewrite.Statement) error {
	if st.Kind == rewrite.KindPassThrough {
		return ss.passThrough(ctx, st)
	}
	r, err := ss.execute(ctx, st, nil, nil)
	if err != nil {
		return err
	}
	if r.empty {
		ss.send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if r.fields != nil {
		ss.send(&pgproto3.RowDescription{Fields: r.fields})
	}
	_, err = ss.sendRows(r, nil, 0)
	return err
}

// execute answers a statement the proxy handles itself. p and paramOIDs
// carry bound parameters (extended protocol); nil for a simple query.
func (ss *session) execute(ctx context.Context, st *rewrite.Statement, p *params, paramOIDs []uint32) (*result, error) {
	switch st.Kind {
	case rewrite.KindEmpty:
		return &result{empty: true}, nil
	case rewrite.KindSetDP:
		return ss.setDP(st)
	case rewrite.KindShowDP:
		return ss.showDP(ctx, st)
	case rewrite.KindPrivate:
		// The slot is taken before anything is charged: a query refused
		// for want of one costs nothing (slots.go).
		release, err := ss.srv.lim.acquirePrivate(ctx, ss.user.Name)
		if err != nil {
			return nil, err
		}
		defer release()
		return ss.privateQuery(ctx, st, p, paramOIDs) // clock.go
	case rewrite.KindExplainDP:
		return ss.explainDP(ctx, st, paramOIDs)
	case rewrite.KindDeallocate:
		return ss.deallocate(ctx, st.Deallocate)
	}
	return nil, newError(codeInternal, "unknown statement kind %d", st.Kind)
}

// sendRows sends r's rows from offset on, at most max of them (0: all),
// converted to the requested result formats. It returns the offset reached;
// when all rows are sent it also sends CommandComplete and the notice.
func (ss *session) sendRows(r *result, formats []int16, max int) (int, error) {
	return ss.sendRowsFrom(r, formats, 0, max)
}

func (ss *session) sendRowsFrom(r *result, formats []int16, offset, max int) (int, error) {
	i := offset
	for ; i < len(r.rows) && (max <= 0 || i-offset < max); i++ {
		row := r.rows[i]
		if len(formats) > 0 {
			conv := make([][]byte, len(row))
			for c, v := range row {
				var err error
				if conv[c], err = ss.convert(r.fields[c].DataTypeOID, formatOf(formats, c), v); err != nil {
					return i, err
				}
			}
			row = conv
		}
		ss.send(&pgproto3.DataRow{Values: row})
	}
	if i < len(r.rows) {
		ss.send(&pgproto3.PortalSuspended{})
		return i, nil
	}
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte(r.tag)})
	if r.notice != "" {
		ss.send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: r.notice})
	}
	return i, nil
}

// passThrough forwards a validated statement that reads no private table
// and relays its results unchanged.
func (ss *session) passThrough(ctx context.Context, st *rewrite.Statement) error {
	pc := ss.upstream.Conn().PgConn()
	if st.DropsPrepared {
		ss.dropAllPrepared()
	}
	if st.ChangesSettings {
		ss.render = ""
	}
	defer upstreamTimer(ctx)()
	mrr := pc.Exec(ctx, st.SQL)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		if fds := rr.FieldDescriptions(); len(fds) > 0 {
			ss.send(rowDescription(fds))
		}
		if err := ss.relayRows(rr); err != nil {
			if !errors.Is(err, errClientGone) {
				mrr.Close()
			}
			return canceled(ctx, err)
		}
	}
	err := mrr.Close()
	ss.sendParameterChanges(false)
	return canceled(ctx, err)
}

// errClientGone wraps a failed write to the client while relaying rows; the
// upstream connection has been abandoned by then.
var errClientGone = errors.New("client write failed")

// relayRows sends an upstream result's rows and its CommandComplete to the
// client as they arrive, flushing every 1024 rows so that a large result
// never sits in memory. If the client cannot keep up (a failed or timed-out
// write), the upstream connection is abandoned rather than drained.
func (ss *session) relayRows(rr *pgconn.ResultReader) error {
	n := 0
	for rr.NextRow() {
		ss.send(&pgproto3.DataRow{Values: rr.Values()})
		if n++; n%1024 == 0 {
			if err := ss.flush(); err != nil {
				ss.abandonUpstream()
				return fmt.Errorf("%w: %w", errClientGone, err)
			}
		}
	}
	tag, err := rr.Close()
	if err != nil {
		return err
	}
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte(tag.String())})
	return nil
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
			return nil, newError(codeInvalidParameter, "invalid value for dp.epsilon: %q: it must be a finite number > 0", v)
		}
		if eps > p.MaxEpsilonPerQuery {
			return nil, newError(codeInvalidParameter, "dp.epsilon = %v exceeds the maximum of %v per query set by the operator (privacy.max_epsilon_per_query)", eps, p.MaxEpsilonPerQuery)
		}
		ss.epsilon = eps
	case "delta":
		if set.Reset {
			ss.delta = p.Delta
			break
		}
		d, err := strconv.ParseFloat(v, 64)
		if err != nil || !conf.ValidDelta(d) || d == 0 {
			return nil, newError(codeInvalidParameter, "invalid value for dp.delta: %q: it must lie in (0, 1)", v)
		}
		ss.delta = d
	case "mechanism":
		if set.Reset {
			ss.mechanism = p.Mechanism
			break
		}
		m := strings.ToLower(v)
		if m != conf.Laplace && m != conf.Gaussian {
			return nil, newError(codeInvalidParameter, "invalid value for dp.mechanism: %q: use laplace or gaussian", v)
		}
		ss.mechanism = m
	case "notices":
		if set.Reset {
			ss.notices = true
			break
		}
		b, ok := parseBool(v)
		if !ok {
			return nil, newError(codeInvalidParameter, "invalid value for dp.notices: %q: use on or off", v)
		}
		ss.notices = b
	case "budget":
		return nil, newError(codeForbidden, "dp.budget cannot be set: it is kept by the ledger")
	default:
		return nil, newError(codeInvalidParameter, "unrecognized configuration parameter \"dp.%s\" (known: dp.epsilon, dp.delta, dp.mechanism, dp.notices, dp.budget)", set.Name)
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
		return nil, newError(codeInvalidParameter, "unrecognized configuration parameter \"dp.%s\" (known: dp.epsilon, dp.delta, dp.mechanism, dp.notices, dp.budget)", st.Setting.Name)
	}
	return textResult(cols, oids, [][]string{vals}, "SHOW"), nil
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
