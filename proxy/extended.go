package proxy

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The extended query protocol. Prepared statements and portals live in the
// proxy: a statement is analysed (and refused) at Parse, before anything
// runs. Pass-through statements are also prepared upstream under a name of
// the proxy's own; private statements are described upstream at Parse (for
// parameter and result types) and run at Execute in their rewritten form,
// with the client's parameters bound as parameters — never spliced into SQL.

// prepared is a client's prepared statement.
type prepared struct {
	st        *rewrite.Statement
	paramOIDs []uint32
	fields    []pgproto3.FieldDescription // nil: no rows (NoData)
	// upstream names the statement prepared upstream (pass-through only),
	// shared is its twin (upstreamstmt.go).
	upstream string
	shared   *upstreamStmt
}

// portal is a bound statement, ready to execute.
type portal struct {
	ps            *prepared
	params        *params
	resultFormats []int16
	// res and sent keep a proxy's result (a private query's, small)
	// across Execute messages with a row limit.
	res  *result
	sent int
	done bool
	// A pass-through portal executed with a row limit streams from a
	// portal of the proxy's upstream, upName (portal.go): suspended
	// while it has more rows, lost when the upstream one ended early.
	upName          string
	suspended, lost bool
}

// extendedMessage handles one message of the extended protocol. An error
// is answered by the caller, which then discards messages until Sync.
func (ss *session) extendedMessage(ctx context.Context, msg pgproto3.FrontendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.Parse:
		return ss.parse(ctx, m)
	case *pgproto3.Bind:
		return ss.bind(m)
	case *pgproto3.Describe:
		return ss.describeMessage(m)
	case *pgproto3.Execute:
		return ss.observedExecute(ctx, m, ss.executePortal)
	case *pgproto3.Close:
		return ss.closeMessage(ctx, m)
	}
	return refuse(pgerr.ProtocolViolation, "unexpected message %T", msg)
}

func (ss *session) parse(ctx context.Context, m *pgproto3.Parse) error {
	began := time.Now() // a refusal's logged duration counts from here
	if m.Name != "" {
		if _, exists := ss.statements[m.Name]; exists {
			return refuse(pgerr.DuplicatePreparedStatement, "prepared statement %q already exists", m.Name)
		}
	}
	// Preparing runs pgconn calls, which end the upstream batch.
	if err := ss.endBatch(ctx); err != nil { // portal.go
		return err
	}
	stmts, err := ss.analyze(ctx, m.Query) // analysis.go
	if err != nil {
		ss.observeRefused(began, refusedText(m.Query, err), err)
		return err
	}
	if len(stmts) > 1 {
		return refuse(pgerr.SyntaxError, "cannot insert multiple commands into a prepared statement")
	}
	if stmts[0].Copy != nil {
		return refuse(pgerr.FeatureNotSupported, "COPY (query) TO STDOUT is answered in a simple query only (as psql's \\copy sends it); prepare the query itself")
	}
	oids := append([]uint32(nil), m.ParameterOIDs...)
	ps := &prepared{st: stmts[0], paramOIDs: oids}
	switch ps.st.Kind {
	case rewrite.KindPassThrough:
		if ps.st.DropsPrepared {
			return refuse(pgerr.FeatureNotSupported, "DISCARD ALL cannot be prepared; send it as a simple query")
		}
		us, err := ss.prepareUpstream(ctx, ps.st.SQL, oids)
		if err != nil {
			return err
		}
		ps.shared, ps.upstream, ps.paramOIDs, ps.fields = us, us.name, us.paramOIDs, us.fields
	case rewrite.KindPrivate, rewrite.KindExplainDP:
		d, err := ss.describe(ctx, ps.st.Plan, oids)
		if err != nil {
			return err
		}
		ps.paramOIDs = d.paramOIDs
		if ps.st.Kind == rewrite.KindPrivate {
			if ps.fields, err = ss.outputFields(ctx, ps.st.Plan, d); err != nil { // postdescribe.go
				return err
			}
		} else {
			ps.fields = textResult([]string{"QUERY PLAN"}, []uint32{oidText}, nil, "").fields
		}
	case rewrite.KindShowDP:
		r, err := ss.showDP(ctx, ps.st)
		if err != nil {
			return err
		}
		ps.fields = r.fields
	}
	ss.closeStatement(ctx, m.Name, false)
	ss.statements[m.Name] = ps
	ss.send(&pgproto3.ParseComplete{})
	return nil
}

func (ss *session) bind(m *pgproto3.Bind) error {
	ps, ok := ss.statements[m.PreparedStatement]
	if !ok {
		return refuse(pgerr.InvalidSQLStatementName, "prepared statement %q does not exist", m.PreparedStatement)
	}
	if len(m.Parameters) != len(ps.paramOIDs) {
		return refuse(pgerr.ProtocolViolation, "bind message supplies %d parameters, but prepared statement %q requires %d", len(m.Parameters), m.PreparedStatement, len(ps.paramOIDs))
	}
	if n := len(m.ParameterFormatCodes); n > 1 && n != len(m.Parameters) {
		return refuse(pgerr.ProtocolViolation, "bind message has %d parameter formats but %d parameters", n, len(m.Parameters))
	}
	if n := len(m.ResultFormatCodes); n > 1 && n != len(ps.fields) {
		return refuse(pgerr.ProtocolViolation, "bind message has %d result formats but the query has %d columns", n, len(ps.fields))
	}
	// The message is only valid until the next Receive: copy what we keep
	// (the values in one allocation; the portal and its parameters in
	// another).
	bp := &struct {
		pt portal
		p  params
	}{}
	p := &bp.p
	p.values, p.formats = make([][]byte, len(m.Parameters)), make([]int16, len(m.Parameters))
	size := 0
	for _, v := range m.Parameters {
		size += len(v)
	}
	data := make([]byte, 0, size)
	for i, v := range m.Parameters {
		if v != nil {
			data = append(data, v...)
			p.values[i] = data[len(data)-len(v) : len(data) : len(data)]
		}
		p.formats[i] = formatOf(m.ParameterFormatCodes, i)
	}
	var rf []int16
	if len(m.ResultFormatCodes) > 0 {
		rf = make([]int16, len(ps.fields))
		for i := range rf {
			rf[i] = formatOf(m.ResultFormatCodes, i)
		}
	}
	ss.closeUpstreamPortal(ss.portals[m.DestinationPortal]) // a portal replaced
	bp.pt = portal{ps: ps, params: p, resultFormats: rf}
	ss.portals[m.DestinationPortal] = &bp.pt
	ss.send(&pgproto3.BindComplete{})
	return nil
}

// formatOf applies the protocol's rule: no codes means text, one code
// applies to all, otherwise one per column.
func formatOf(codes []int16, i int) int16 {
	switch {
	case len(codes) == 0:
		return pgtype.TextFormatCode
	case len(codes) == 1:
		return codes[0]
	case i < len(codes):
		return codes[i]
	}
	return pgtype.TextFormatCode
}

func (ss *session) describeMessage(m *pgproto3.Describe) error {
	switch m.ObjectType {
	case 'S':
		ps, ok := ss.statements[m.Name]
		if !ok {
			return refuse(pgerr.InvalidSQLStatementName, "prepared statement %q does not exist", m.Name)
		}
		ss.send(&pgproto3.ParameterDescription{ParameterOIDs: ps.paramOIDs})
		ss.sendFields(ps.fields, nil)
	case 'P':
		pt, ok := ss.portals[m.Name]
		if !ok {
			return refuse(pgerr.InvalidCursorName, "portal %q does not exist", m.Name)
		}
		ss.sendFields(pt.ps.fields, pt.resultFormats)
	default:
		return refuse(pgerr.ProtocolViolation, "invalid DESCRIBE message subtype %d", m.ObjectType)
	}
	return nil
}

func (ss *session) sendFields(fields []pgproto3.FieldDescription, formats []int16) {
	if fields == nil {
		ss.send(&pgproto3.NoData{})
		return
	}
	fs := fields
	for i := range fields {
		if f := formatOf(formats, i); f != fields[i].Format {
			if &fs[0] == &fields[0] {
				fs = append([]pgproto3.FieldDescription(nil), fields...) // shared: copied before a change
			}
			fs[i].Format = f
		}
	}
	ss.send(&pgproto3.RowDescription{Fields: fs})
}

func (ss *session) executePortal(ctx context.Context, m *pgproto3.Execute) error {
	pt, ok := ss.portals[m.Portal]
	if !ok {
		return refuse(pgerr.InvalidCursorName, "portal %q does not exist", m.Portal)
	}
	max := int(m.MaxRows)
	if pt.ps.st.ChangesSettings {
		ss.settingsDirty = true
		ss.render = ""
		ss.analystStale = true // RESET ALL, DISCARD (analyst.go)
	}
	if pt.ps.st.Kind == rewrite.KindPassThrough && (pt.suspended || pt.lost || !pt.done && (max > 0 || ss.upBatch)) {
		// A row limit, or another portal suspended upstream: stream
		// from an upstream portal, holding no more than one row
		// (portal.go).
		return ss.streamPortal(ctx, m.Portal, pt, m.MaxRows)
	}
	if pt.ps.st.Kind != rewrite.KindPassThrough {
		if err := ss.endBatch(ctx); err != nil {
			return err
		}
	}
	if pt.res == nil && !pt.done {
		if pt.ps.st.Kind == rewrite.KindPassThrough {
			pt.done = true
			return ss.executeUpstream(ctx, pt)
		}
		var err error
		pt.res, err = ss.execute(ctx, pt.ps.st, pt.params, pt.ps.paramOIDs)
		if err != nil {
			pt.done = true
			return err
		}
	}
	if pt.res == nil {
		// Executing a finished portal again returns no more rows.
		ss.send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
		return nil
	}
	if pt.res.empty {
		ss.send(&pgproto3.EmptyQueryResponse{})
		pt.res, pt.done = nil, true
		return nil
	}
	next, err := ss.sendRowsFrom(pt.res, pt.resultFormats, pt.sent, max)
	pt.sent = next
	if err != nil || next >= len(pt.res.rows) {
		pt.res, pt.done = nil, true
	}
	return err
}

// executeUpstream runs a pass-through portal upstream and streams its rows.
func (ss *session) executeUpstream(ctx context.Context, pt *portal) error {
	ss.ensureAnalyst(ctx, pt.ps.st.SQL)
	defer timeUpstream(obsFrom(ctx), time.Now())
	if err := ss.relayUpstream(ctx, false, &pgproto3.Bind{PreparedStatement: pt.ps.upstream,
		ParameterFormatCodes: pt.params.formats, Parameters: pt.params.values, ResultFormatCodes: pt.resultFormats},
		&pgproto3.Execute{}, &pgproto3.Sync{}); err != nil { // relay.go
		return err
	}
	ss.sendParameterChanges(false)
	return nil
}

func (ss *session) closeMessage(ctx context.Context, m *pgproto3.Close) error {
	switch m.ObjectType {
	case 'S':
		// Deallocating upstream is a pgconn call, which ends the batch.
		if err := ss.endBatch(ctx); err != nil {
			return err
		}
		ss.closeStatement(ctx, m.Name, true)
	case 'P':
		ss.closeUpstreamPortal(ss.portals[m.Name])
		delete(ss.portals, m.Name)
	default:
		return refuse(pgerr.ProtocolViolation, "invalid CLOSE message subtype %d", m.ObjectType)
	}
	ss.send(&pgproto3.CloseComplete{})
	return nil
}

// closeStatement forgets a prepared statement (if any) and gives back its
// upstream twin. Closing it (Close, DEALLOCATE) closes its portals too;
// replacing it (a Parse of its name: the unnamed statement's usual fate)
// keeps the portals that already run, as PostgreSQL does, since they need
// it no more: one streaming from an upstream portal, or holding a private
// result. (pgJDBC fetches a cursor's rows in batches while it runs other
// statements through the unnamed statement.)
func (ss *session) closeStatement(ctx context.Context, name string, closePortals bool) {
	ps, ok := ss.statements[name]
	if !ok {
		return
	}
	delete(ss.statements, name)
	for k, pt := range ss.portals {
		if pt.ps != ps || !closePortals && (pt.upName != "" || pt.res != nil) {
			continue
		}
		ss.closeUpstreamPortal(pt)
		delete(ss.portals, k)
	}
	if ps.shared != nil {
		ss.releaseUpstreamStmt(ctx, ps.shared)
	}
}

// deallocate implements DEALLOCATE name | ALL on the proxy's statements.
func (ss *session) deallocate(ctx context.Context, name string) (*result, error) {
	if name == "" {
		for n := range ss.statements {
			ss.closeStatement(ctx, n, true)
		}
		return &result{tag: "DEALLOCATE ALL"}, nil
	}
	if _, ok := ss.statements[name]; !ok {
		return nil, refuse(pgerr.InvalidSQLStatementName, "prepared statement %q does not exist", name)
	}
	ss.closeStatement(ctx, name, true)
	return &result{tag: "DEALLOCATE"}, nil
}

// dropAllPrepared forgets every statement and portal; the upstream drops
// its twins itself (DISCARD ALL).
func (ss *session) dropAllPrepared() {
	ss.forgetBackendStmts() // pool.go
	clear(ss.statements)
	clear(ss.portals)
	clear(ss.upstreamStmts)
}

// convert re-encodes a text value in the requested format.
func (ss *session) convert(oid uint32, format int16, v []byte) ([]byte, error) {
	if v == nil || format == pgtype.TextFormatCode {
		return v, nil
	}
	types := ss.typeMap()
	t, ok := types.TypeForOID(oid)
	if !ok {
		return nil, refuse(pgerr.FeatureNotSupported, "binary result format is not supported for type oid %d; request text", oid)
	}
	val, err := t.Codec.DecodeValue(types, oid, pgtype.TextFormatCode, v)
	if err != nil {
		return nil, fail(pgerr.InternalError, "cannot convert a result value of type oid %d to binary", oid)
	}
	out, err := types.Encode(oid, pgtype.BinaryFormatCode, val, nil)
	if err != nil {
		return nil, fail(pgerr.InternalError, "cannot encode a result value of type oid %d in binary", oid)
	}
	return out, nil
}
