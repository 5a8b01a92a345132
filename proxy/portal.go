package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Streaming pass-through portals. A client that executes a portal with a
// row limit (Execute with MaxRows: pgJDBC's fetch size, node-postgres's
// cursors) gets its rows a batch at a time, and the result may be larger
// than memory. So the proxy does what the client does, upstream: it binds a
// portal of its own there and sends Execute with the same row limit and
// Flush, not Sync, which leaves the upstream portal suspended between the
// client's Executes; at most one message is in the proxy's hands at a
// time, relayed as it arrives.
//
// The upstream is then in the middle of an extended-protocol batch
// (session.upBatch) until the proxy sends Sync: at the client's Sync, or
// before anything else needs the upstream connection (a simple query,
// Parse, Close of a statement, a private query), since pgconn's calls end
// with a Sync of their own. Inside a transaction block, that Sync leaves the
// upstream portals open, as PostgreSQL keeps them to the end of the
// transaction; outside one, it ends the implicit transaction and with it
// the suspended portals, where PostgreSQL would have kept them until the
// client's Sync: executing such a portal again is refused (0A000), never
// answered with rows from elsewhere. Clients that fetch with a row limit
// (pgJDBC, asyncpg) do so in a transaction block, and node-postgres's
// cursors send nothing else before their Sync.

// portalLost is the refusal of a portal whose upstream twin ended.
func portalLost(name string) error {
	return refuse(pgerr.FeatureNotSupported, "portal %q can no longer be fetched: another statement needed the upstream connection before the Sync that ends this batch, outside a transaction block; fetch a portal to its end first, or use a transaction block (BEGIN)", name)
}

// streamPortal executes the pass-through portal pt upstream, with the
// client's row limit max (0: all rows), and relays what comes back: rows,
// then PortalSuspended or the command's completion.
func (ss *session) streamPortal(ctx context.Context, name string, pt *portal, max uint32) error {
	if pt.lost {
		return portalLost(name)
	}
	if err := ctx.Err(); err != nil {
		return canceled(ctx, err)
	}
	pc := ss.upstream.Conn().PgConn()
	msgs := ss.takeClosePending()
	if pt.upName == "" {
		ss.upstreamSeq++
		pt.upName = fmt.Sprintf("dpproxy_p%d", ss.upstreamSeq)
		msgs = append(msgs, &pgproto3.Bind{DestinationPortal: pt.upName, PreparedStatement: pt.ps.upstream,
			ParameterFormatCodes: pt.params.formats, Parameters: pt.params.values, ResultFormatCodes: pt.resultFormats})
	}
	msgs = append(msgs, &pgproto3.Execute{Portal: pt.upName, MaxRows: max}, &pgproto3.Flush{})
	defer upstreamTimer(ctx)()
	ss.upBatch = true
	if err := ss.sendUpstream(msgs...); err != nil {
		return err
	}
	// One watch for the whole relay, not one per row: a cancel or a
	// client gone cancels the statement upstream, which then ends the
	// relay with its error.
	sent := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { defer close(sent); ss.cancelRequest() })
	defer func() {
		if !stop() {
			// A cancel still on its way could hit the session's next
			// statement: let it arrive while the backend is idle, where
			// PostgreSQL ignores it.
			<-sent
			time.Sleep(10 * time.Millisecond)
		}
	}()
	n := 0
	for {
		msg, err := pc.ReceiveMessage(context.Background())
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			ss.send(m) // encoded at once: m is only valid until the next receive
			if n++; n%1024 == 0 {
				if err := ss.flush(); err != nil {
					ss.abandonUpstream()
					return fmt.Errorf("%w: %w", errClientGone, err)
				}
			}
		case *pgproto3.PortalSuspended:
			pt.suspended = true
			ss.send(m)
			return nil
		case *pgproto3.CommandComplete:
			pt.suspended, pt.done = false, true
			ss.send(&pgproto3.CommandComplete{CommandTag: append([]byte(nil), m.CommandTag...)})
			ss.sendParameterChanges(false)
			return nil
		case *pgproto3.EmptyQueryResponse:
			pt.suspended, pt.done = false, true
			ss.send(m)
			return nil
		case *pgproto3.ErrorResponse:
			// The upstream now skips to Sync, and the client will too.
			pt.suspended, pt.done = false, true
			pgErr := pgconn.ErrorResponseToPgError(m)
			if err := ss.endBatch(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			return pgErr
		}
		// BindComplete, CloseComplete: nothing for the client. Notices
		// and parameter changes went through pgconn's handlers.
	}
}

// cancelRequest asks the upstream to cancel what the session's connection
// runs, from another goroutine.
func (ss *session) cancelRequest() {
	ctx, cancel := context.WithTimeout(context.Background(), cancelDeadline)
	defer cancel()
	if err := ss.upstream.Conn().PgConn().CancelRequest(ctx); err != nil {
		ss.log.Info("cancel request to the upstream failed", "err", err)
	}
}

// endBatch ends the upstream's open extended-protocol batch, if any, with
// a Sync. Outside a transaction block the upstream portals end with it
// (see the top of this file).
func (ss *session) endBatch(ctx context.Context) error {
	if !ss.upBatch {
		if ss.txStatus() == 'I' {
			// No portal of the proxy's is open upstream.
			ss.closePending = ss.closePending[:0]
		}
		return nil
	}
	pc := ss.upstream.Conn().PgConn()
	if err := ss.sendUpstream(append(ss.takeClosePending(), &pgproto3.Sync{})...); err != nil {
		return err
	}
	// The Sync must be answered even after a cancel: until then the
	// connection is unusable.
	ctx = context.WithoutCancel(ctx)
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	ss.upBatch = false
	if pc.TxStatus() == 'I' {
		for _, pt := range ss.portals {
			if pt.suspended {
				pt.suspended, pt.lost = false, true
			}
		}
	}
	return nil
}

// sendUpstream writes msgs to the upstream connection, which pgconn holds
// idle between its calls. A failed write leaves the connection unusable:
// it is closed, and the session ends at its next upstream call.
func (ss *session) sendUpstream(msgs ...pgproto3.FrontendMessage) error {
	pc := ss.upstream.Conn().PgConn()
	fe := pc.Frontend()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		ss.abandonUpstream()
		return fmt.Errorf("proxy: writing to the upstream: %w", err)
	}
	return nil
}

// takeClosePending returns Close messages for the portals queued by
// closeUpstreamPortal, and empties the queue.
func (ss *session) takeClosePending() []pgproto3.FrontendMessage {
	var msgs []pgproto3.FrontendMessage
	for _, n := range ss.closePending {
		msgs = append(msgs, &pgproto3.Close{ObjectType: 'P', Name: n})
	}
	ss.closePending = ss.closePending[:0]
	return msgs
}

// closeUpstreamPortal queues pt's upstream portal for Close, sent with the
// next message of a batch (a portal closed or replaced by the client).
func (ss *session) closeUpstreamPortal(pt *portal) {
	if pt != nil && pt.upName != "" && !pt.done && !pt.lost {
		ss.closePending = append(ss.closePending, pt.upName)
	}
}
