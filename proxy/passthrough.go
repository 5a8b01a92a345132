package proxy

import (
	"context"
	"errors"
	"fmt"

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
