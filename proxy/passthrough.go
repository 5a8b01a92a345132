package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/rewrite"
)

// Pass-through statements (simple protocol): forwarded as they are, their
// results relayed as they arrive (relay.go). The extended protocol's are in
// extended.go and portal.go.

// passThrough forwards a validated statement that reads no private table
// and relays its results unchanged.
func (ss *session) passThrough(ctx context.Context, st *rewrite.Statement) error {
	if st.DropsPrepared {
		ss.dropAllPrepared()
	}
	if st.ChangesSettings {
		ss.settingsDirty = true
		ss.render = ""
		ss.analystStale = true // RESET ALL, DISCARD (analyst.go)
	}
	ss.ensureAnalyst(ctx, st.SQL)
	defer timeUpstream(obsFrom(ctx), time.Now())
	err := ss.relayUpstream(ctx, true, &pgproto3.Query{String: st.SQL})
	if !errors.Is(err, errClientGone) {
		ss.sendParameterChanges(false)
	}
	return err
}

// errClientGone wraps a failed write to the client while relaying rows; the
// upstream connection has been abandoned by then.
var errClientGone = errors.New("client write failed")

// timeUpstream adds the time since t to q's upstream time (as
// upstreamTimer, without its closure): defer timeUpstream(obsFrom(ctx),
// time.Now()).
func timeUpstream(q *queryObs, t time.Time) {
	if q != nil {
		q.upstream += time.Since(t)
	}
}

// rowDescription converts pgconn's description of a result back to the
// message.
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

// The ReadyForQuery messages, one per transaction status, shared and
// never modified: answering a query allocates none.
var (
	readyIdle   = &pgproto3.ReadyForQuery{TxStatus: 'I'}
	readyInTx   = &pgproto3.ReadyForQuery{TxStatus: 'T'}
	readyFailed = &pgproto3.ReadyForQuery{TxStatus: 'E'}
)

// readyForQuery is the ReadyForQuery message of a transaction status.
func readyForQuery(status byte) *pgproto3.ReadyForQuery {
	switch status {
	case 'I':
		return readyIdle
	case 'T':
		return readyInTx
	case 'E':
		return readyFailed
	}
	return &pgproto3.ReadyForQuery{TxStatus: status}
}
