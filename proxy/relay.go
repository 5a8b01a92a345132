package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// The relay of a pass-through statement (passthrough.go, extended.go): the
// session writes the statement to its upstream connection itself and
// relays the answer to the client message by message as it arrives, each
// encoded into the client's write buffer at once; the client gets it in
// one write, at ReadyForQuery (loop.go), or every relayFlushRows rows.
//
// pgconn's own calls (Exec, ExecPrepared) would convert every message
// into pgconn's types and back, and arm a timer around each write (its
// guard against a write blocked while the server is blocked writing to
// us): re-arming it wakes the Go scheduler's network poller, a thread
// woken per query (BenchmarkPassThrough; bench/RESULTS.md). The relay's
// writes are one statement's messages, which the socket buffer takes
// whole, to a server that writes nothing while it waits for them.

// relayFlushRows is how many rows the relay holds before it flushes them to
// the client, so that a large result never sits in memory.
const relayFlushRows = 1024

// relayUpstream sends msgs (a Query, or Bind, Execute and Sync) to the
// upstream and relays its answer until ReadyForQuery: RowDescription
// (when descs), DataRow, CommandComplete and EmptyQueryResponse go to the
// client as received; an ErrorResponse is returned, as a *pgconn.PgError,
// once the upstream is ready again. Notices reach the client through
// pgconn's handler (routeNotice) and parameter changes through
// sendParameterChanges. If ctx ends first, the statement is cancelled
// upstream, and the connection is closed if the upstream does not answer
// within cancelDeadline (as cancelUpstreamOnDone does for pgconn's calls).
// If the client cannot keep up (a failed or timed-out write), the upstream
// connection is abandoned rather than drained.
func (ss *session) relayUpstream(ctx context.Context, descs bool, msgs ...pgproto3.FrontendMessage) error {
	if err := ctx.Err(); err != nil {
		return canceled(ctx, err)
	}
	pc := ss.upstream.Conn().PgConn()
	defer ss.watchUpstream(ctx, pc).end()
	if err := ss.sendUpstream(msgs...); err != nil {
		return err
	}
	var pgErr error
	n := 0
	for {
		msg, err := pc.ReceiveMessage(context.Background())
		if err != nil {
			// A broken connection (pgconn closed it) or the deadline
			// after an unanswered cancel: the answer is incomplete.
			if !pc.IsClosed() {
				cctx, cancel := context.WithTimeout(context.Background(), time.Second)
				pc.Close(cctx)
				cancel()
			}
			return canceled(ctx, err)
		}
		switch m := msg.(type) {
		case *pgproto3.RowDescription:
			if descs {
				ss.send(m)
			}
		case *pgproto3.DataRow:
			ss.send(m)
			if n++; n%relayFlushRows == 0 {
				if err := ss.flush(); err != nil {
					ss.abandonUpstream()
					return fmt.Errorf("%w: %w", errClientGone, err)
				}
			}
		case *pgproto3.CommandComplete, *pgproto3.EmptyQueryResponse:
			ss.send(m)
		case *pgproto3.ErrorResponse:
			if pgErr == nil {
				pgErr = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.CopyInResponse:
			// Never from an analysed statement (COPY FROM is refused);
			// the upstream would wait for data forever.
			if err := ss.sendUpstream(&pgproto3.CopyFail{Message: "dpproxy sends no COPY data"}); err != nil {
				return err
			}
		case *pgproto3.ReadyForQuery:
			return pgErr
		}
		// BindComplete: nothing for the client; notices and parameter
		// changes went through pgconn's handlers.
	}
}

// upstreamWatch cancels a session's upstream statement when its context
// ends (watchUpstream), until end.
type upstreamWatch struct {
	ss    *session
	pc    *pgconn.PgConn
	stop  func() bool
	fired sync.WaitGroup
}

// watchUpstream cancels pc's statement when ctx ends, until the returned
// watch's end: a CancelRequest, and a deadline on the connection in case
// the upstream never answers. end waits for a cancel on its way and then
// lets it arrive while the backend is idle, where PostgreSQL ignores it,
// as pgconn's CancelRequestContextWatcherHandler does.
func (ss *session) watchUpstream(ctx context.Context, pc *pgconn.PgConn) *upstreamWatch {
	if ctx.Done() == nil {
		return nil
	}
	w := &upstreamWatch{ss: ss, pc: pc}
	w.fired.Add(1)
	w.stop = context.AfterFunc(ctx, w.fire)
	return w
}

func (w *upstreamWatch) fire() {
	defer w.fired.Done()
	w.pc.Conn().SetDeadline(time.Now().Add(cancelDeadline))
	w.ss.cancelRequest()
}

func (w *upstreamWatch) end() {
	if w == nil || w.stop() {
		return
	}
	w.fired.Wait()
	time.Sleep(100 * time.Millisecond)
	if !w.pc.IsClosed() {
		w.pc.Conn().SetDeadline(time.Time{})
	}
}
