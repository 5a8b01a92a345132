package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/rewrite"
)

// Pass-through statements (simple protocol): forwarded as they are, their
// results relayed as they arrive. The extended protocol's are in
// extended.go and portal.go.

// passThrough forwards a validated statement that reads no private table
// and relays its results unchanged.
func (ss *session) passThrough(ctx context.Context, st *rewrite.Statement) error {
	pc := ss.upstream.Conn().PgConn()
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
	rb := &relayBuf{}
	mrr := pc.Exec(ctx, st.SQL)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		if fds := rr.FieldDescriptions(); len(fds) > 0 {
			ss.send(rb.rowDescription(fds))
		}
		if err := ss.relayRows(rr, rb); err != nil {
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

// relayBuf holds the messages of a relayed statement's results, allocated
// once per statement rather than once per row: Send encodes a message at
// once, so one struct serves every row, and a small result's description
// fits in its arrays.
type relayBuf struct {
	row    pgproto3.DataRow
	done   pgproto3.CommandComplete
	desc   pgproto3.RowDescription
	tag    [32]byte
	fields [4]pgproto3.FieldDescription
	names  [64]byte
}

// timeUpstream adds the time since t to q's upstream time (as
// upstreamTimer, without its closure): defer timeUpstream(obsFrom(ctx),
// time.Now()).
func timeUpstream(q *queryObs, t time.Time) {
	if q != nil {
		q.upstream += time.Since(t)
	}
}

// relayRows sends an upstream result's rows and its CommandComplete to the
// client as they arrive, flushing every 1024 rows so that a large result
// never sits in memory. If the client cannot keep up (a failed or timed-out
// write), the upstream connection is abandoned rather than drained. rb may
// be nil.
func (ss *session) relayRows(rr *pgconn.ResultReader, rb *relayBuf) error {
	if rb == nil {
		rb = &relayBuf{}
	}
	n := 0
	for rr.NextRow() {
		rb.row.Values = rr.Values()
		ss.send(&rb.row)
		if n++; n%1024 == 0 {
			if err := ss.flush(); err != nil {
				ss.abandonUpstream()
				return fmt.Errorf("%w: %w", errClientGone, err)
			}
		}
	}
	rb.row.Values = nil
	tag, err := rr.Close()
	if err != nil {
		return err
	}
	rb.done.CommandTag = append(rb.tag[:0], tag.String()...)
	ss.send(&rb.done)
	return nil
}

// rowDescription converts pgconn's description of a result back to the
// message, in rb's arrays when they are large enough.
func (rb *relayBuf) rowDescription(fds []pgconn.FieldDescription) *pgproto3.RowDescription {
	names := rb.names[:0]
	rb.desc.Fields = rb.fields[:0]
	for _, f := range fds {
		start := len(names)
		names = append(names, f.Name...)
		rb.desc.Fields = append(rb.desc.Fields, pgproto3.FieldDescription{
			Name: names[start:len(names):len(names)], TableOID: f.TableOID, TableAttributeNumber: f.TableAttributeNumber,
			DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format,
		})
	}
	return &rb.desc
}

// rowDescription converts pgconn's description of a result back to the
// message, in memory of its own (to keep).
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
