package proxy

import (
	"fmt"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The client connection's deadlines once the session runs (its startup
// runs under limits.auth_timeout, negotiate.go): limits.idle_timeout while
// it waits for a message, limits.write_timeout while it writes.

// armIdle starts the idle clock before the session waits for a message. A
// shutdown wake-up (a read deadline of now) set later still wins.
//
// Moving a deadline updates a runtime timer, which costs more than the
// rest of a cached pass-through query's bookkeeping, so deadlines move
// lazily: only when the one set would fire less than d from now, and then
// to d + d/8 from now. The idle timeout therefore ends a session between
// d and 9d/8 after its last message; a deadline that fires early is told
// apart by idleExpired and re-armed.
func (ss *session) armIdle() {
	ss.idleSince = time.Now()
	if d := ss.srv.lim.cfg.IdleTimeout; d > 0 {
		ss.readDeadline = lazyDeadline(ss.client.SetReadDeadline, ss.readDeadline, ss.idleSince, d)
	}
}

// lazyDeadline returns the deadline to keep: cur if it is at least d after
// now, else now + d + d/8, which it sets.
func lazyDeadline(set func(time.Time) error, cur, now time.Time, d time.Duration) time.Time {
	if !cur.IsZero() && cur.Sub(now) >= d {
		return cur
	}
	next := now.Add(d + d/8)
	set(next)
	return next
}

// idleExpired reports whether a read timeout was the idle timeout (rather
// than a shutdown wake-up or a lazily set deadline that fired early); if
// so it tells the client, which is then closed.
func (ss *session) idleExpired() bool {
	d := ss.srv.lim.cfg.IdleTimeout
	if d <= 0 || time.Since(ss.idleSince) < d {
		ss.readDeadline = time.Time{} // it fired: set it again
		return false
	}
	ss.log.Info("idle timeout", "after", d)
	ss.send(fatalResponse(pgerr.IdleSessionTimeout, fmt.Sprintf("terminating connection due to idle-session timeout (limits.idle_timeout = %v)", d)))
	ss.flush()
	return true
}

// armWrite bounds how long one flush to the client may block (between d
// and 9d/8, see armIdle): a client that stops reading its results would
// otherwise hold an upstream connection.
func (ss *session) armWrite() {
	if d := ss.srv.lim.cfg.WriteTimeout; d > 0 {
		ss.writeDeadline = lazyDeadline(ss.client.SetWriteDeadline, ss.writeDeadline, time.Now(), d)
	}
}

// writeFailed closes the client connection after a failed or timed-out
// write: part of a message may have gone out, so the stream is unusable, and
// the session must end rather than wait for its next message.
func (ss *session) writeFailed(err error) error {
	if err != nil {
		ss.client.Close()
	}
	return err
}
