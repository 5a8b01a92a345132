package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// An idle session gives back its read buffer. pgproto3's Backend reads
// the client through a buffer of 8 KiB that it keeps for its life: a
// quarter of an idle session's memory, multiplied by every connected
// client. A session idle for two ticks of the watcher (clientgone.go,
// 0.5 to 1 s) gives its Backend back (to idleBackends, below), waits
// until the client sends something without any buffer (poll, then a
// one-byte MSG_PEEK), and takes a Backend again for the next message.
// Busy sessions never pay for it: a session that sends a message at
// least every half second keeps its Backend.
//
// A Backend may be given back only when it holds no byte it has not
// returned as a message and nothing sent but not flushed (unflushed): frameReader, through which it reads, follows the
// framing of what it hands out, and a read that begins with every byte
// handed out in complete messages means the Backend's buffer is empty
// (it reads only for a header or a body it does not have whole, and a
// complete message is at least a header). The watcher wakes the session
// with a read deadline of now; a wake that finds part of a message handed
// out (a client that paused mid-message), or answers waiting for a Sync
// or Flush, changes nothing. Sessions over
// TLS keep their Backend (crypto/tls buffers records of its own).

// frameReader is the raw client connection as the session's Backend
// reads it.
type frameReader struct {
	conn net.Conn
	// typed: past the startup packets, whose length has no type byte
	// before it (and whose code, the next four bytes, is read with the
	// length here, as every startup packet has one).
	typed bool
	hdr   [8]byte // the current header's bytes handed out so far
	nhdr  int
	body  int // bytes of the current message's body still to hand out
	// clean: the last Read began with every byte handed out in complete
	// messages and handed out none (it failed: a timeout).
	clean  bool
	broken bool // a length no message can have: never clean again
}

func (f *frameReader) Read(p []byte) (int, error) {
	start := f.nhdr == 0 && f.body == 0 && !f.broken
	n, err := f.conn.Read(p)
	f.track(p[:n])
	f.clean = start && n == 0
	return n, err
}

// track follows the message boundaries in b, the next bytes handed out.
func (f *frameReader) track(b []byte) {
	for len(b) > 0 && !f.broken {
		if f.body > 0 {
			k := min(f.body, len(b))
			f.body -= k
			b = b[k:]
			continue
		}
		hl := 8 // length and code of a startup packet
		if f.typed {
			hl = 5 // type and length
		}
		k := copy(f.hdr[f.nhdr:hl], b)
		f.nhdr += k
		b = b[k:]
		if f.nhdr < hl {
			return
		}
		f.nhdr = 0
		if f.typed {
			n := int32(binary.BigEndian.Uint32(f.hdr[1:5]))
			f.body = int(n) - 4
		} else {
			n := int32(binary.BigEndian.Uint32(f.hdr[0:4]))
			f.body = int(n) - 8
			switch binary.BigEndian.Uint32(f.hdr[4:8]) {
			case pgproto3.ProtocolVersion30, pgproto3.ProtocolVersion32:
				f.typed = true // a StartupMessage: typed messages follow
			}
		}
		if f.body < 0 {
			f.broken = true
		}
	}
}

// A Backend given back by an idle session goes to idleBackends, from
// which sessions starting or waking take theirs: the buffers are reused
// rather than left for the collector, which in a burst of connections
// would let the heap (and RSS) grow by the garbage until its next cycle.
// A Backend given back is as new: its buffer holds no unread byte, its
// write buffer nothing unsent, its last message was whole (a flyweight
// message is decoded afresh before a Receive returns it), and its
// authentication type is the default the proxy never changes (auth.go
// reads passwords with Receive as PasswordMessage). It reads and writes
// through sharedRW, pointed at the session that holds it.
var idleBackends = sync.Pool{New: func() any {
	sb := &sharedBackend{}
	sb.be = pgproto3.NewBackend(&sb.rw, &sb.rw)
	return sb
}}

type sharedBackend struct {
	be *pgproto3.Backend
	rw sharedRW
}

// sharedRW is a pooled Backend's connection: the holder's frameReader
// and client connection.
type sharedRW struct {
	r io.Reader
	w io.Writer
}

func (s *sharedRW) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *sharedRW) Write(p []byte) (int, error) { return s.w.Write(p) }

// newBackend is the session's Backend on the client connection: a pooled
// one on a raw connection, its own over TLS.
func (ss *session) newBackend() *pgproto3.Backend {
	var be *pgproto3.Backend
	if ss.frames != nil {
		sb := idleBackends.Get().(*sharedBackend)
		sb.rw.r, sb.rw.w = ss.frames, ss.client
		ss.shared = sb
		be = sb.be
	} else {
		be = pgproto3.NewBackend(ss.client, ss.client)
	}
	be.SetMaxBodyLen(ss.srv.opts.MaxMessageSize)
	return be
}

// returnBackend puts the session's Backend, empty, into idleBackends.
func (ss *session) returnBackend() {
	if sb := ss.shared; sb != nil && sb.be == ss.backend {
		sb.rw.r, sb.rw.w = nil, nil
		idleBackends.Put(sb)
	}
	ss.shared = nil
	ss.backend = nil
}

// markReleasable marks the session, at the start of its message loop, as
// one whose Backend may be dropped while idle: not over TLS.
func (ss *session) markReleasable() {
	ok := canAwait && ss.frames != nil && ss.client == ss.frames.conn
	if !ok {
		ss.frames = nil
		ss.shared = nil // a TLS session's first Backend, left for the collector
	}
	ss.mu.Lock()
	ss.releasable = ok
	ss.mu.Unlock()
}

// idleLong is the watcher's look at a session: one idle in its message
// loop at this tick and the last, with no message in between, and not
// yet woken in this idle spell, is woken (a read deadline of now) to
// drop its Backend. The deadline is set under mu, which stmtContext
// holds when it restores the session's own deadline for a message that
// arrived meanwhile.
func (ss *session) idleLong() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	idle := ss.releasable && !ss.inQuery && !ss.shutdown
	seen := ss.idleSeen
	ss.idleSeen = 0
	if idle {
		ss.idleSeen = ss.msgSeq + 1
	}
	if idle && seen == ss.msgSeq+1 && ss.idleWoken != ss.msgSeq+1 {
		ss.idleWoken = ss.msgSeq + 1
		ss.idleWake = true
		ss.client.SetReadDeadline(time.Now())
	}
}

// unwakeLocked clears a wake that found the session busy or not at a message
// boundary, restoring the session's own read deadline (ss.mu held).
// A shutdown's wake is left in place.
func (ss *session) unwakeLocked() {
	if ss.idleWake {
		ss.idleWake = false
		if !ss.shutdown {
			ss.client.SetReadDeadline(ss.readDeadline)
		}
	}
}

// receive is Backend.Receive for the message loop's wait between
// messages: a wake from the watcher drops the Backend and waits for the
// client without it.
func (ss *session) receive() (pgproto3.FrontendMessage, error) {
	for {
		msg, err := ss.backend.Receive()
		if err == nil {
			return msg, nil
		}
		ss.mu.Lock()
		woken := ss.idleWake
		ss.unwakeLocked()
		shutdown := ss.shutdown
		ss.mu.Unlock()
		var ne net.Error
		if !woken || shutdown || !errors.As(err, &ne) || !ne.Timeout() {
			return nil, err
		}
		if ss.unflushed || ss.frames == nil || !ss.frames.clean {
			// Part of a message is in the Backend, or answers wait in it
			// for a Flush: the wake changes nothing (the deadline is the
			// session's own again), and the session reads on.
			continue
		}
		ss.returnBackend()
		if ss.srv.metrics != nil {
			ss.srv.metrics.idleReleased.Inc()
		}
		err = ss.awaitClient()
		ss.backend = ss.newBackend()
		if err != nil {
			return nil, err // a timeout (idle, shutdown) or a broken connection
		}
	}
}

// awaitClient waits until the client connection is readable (or at its
// end), under the session's read deadline, without a buffer.
func (ss *session) awaitClient() error {
	sc, ok := ss.client.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil // Receive will fail the same way
	}
	ss.mu.Lock()
	shutdown := ss.shutdown
	ss.mu.Unlock()
	if shutdown {
		return os.ErrDeadlineExceeded // its wake may have been undone above
	}
	return raw.Read(readable) // sessionidle_linux.go
}
