package proxy

import "time"

// The watcher of clients gone: one of the three things that cancel a
// session's message (cancel.go).
//
// PostgreSQL does not notice that a client went away while a statement
// runs: it reads nothing from the client until the statement ends, and a
// statement that sends no rows (a count over a huge series) runs to its end
// or its statement_timeout. The proxy's watcher looks at the client socket
// of every session busy with one message for more than clientCheckInterval,
// as PostgreSQL's client_connection_check_interval does (poll for
// POLLRDHUP, clientgone_linux.go), and cancels that message's work.

// clientCheckInterval is how often the watcher looks for clients gone
// during a long statement: a statement goes on at most about twice this
// after its client left.
const clientCheckInterval = 500 * time.Millisecond

// startWatch starts the watcher of clients gone during long statements;
// stopWatch (in Close) ends it.
func (s *Server) startWatch() {
	stop := make(chan struct{})
	s.lim.watchStop = stop
	go s.watchClients(stop)
}

func (s *Server) stopWatch() {
	s.lim.watchOnce.Do(func() {
		if s.lim.watchStop != nil {
			close(s.lim.watchStop)
		}
	})
}

func (s *Server) watchClients(stop <-chan struct{}) {
	t := time.NewTicker(clientCheckInterval)
	defer t.Stop()
	var busy []*session
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		busy = busy[:0]
		s.mu.Lock()
		for ss := range s.sessions {
			if ss.longMessage() {
				busy = append(busy, ss)
			}
			ss.idleLong() // sessionidle.go: idle sessions drop their read buffer
		}
		s.mu.Unlock()
		for _, ss := range busy {
			if clientGone(ss.client) {
				ss.clientLeft()
			}
		}
	}
}

// longMessage reports whether the session has been busy with the same
// message since the watcher's last look (and the watcher has not cancelled
// it yet): only then is its client's socket checked, at every tick, since a
// client can leave at any time during a long statement.
func (ss *session) longMessage() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	long := ss.inQuery && ss.msgSeq == ss.watchSeq && ss.msgSeq != ss.goneSeq
	ss.watchSeq = ss.msgSeq
	return long
}

// clientLeft cancels the session's message, its client gone.
func (ss *session) clientLeft() {
	ss.mu.Lock()
	ss.goneSeq = ss.msgSeq
	ss.mu.Unlock()
	ss.log.Info("client gone during a statement: cancelling it upstream")
	ss.cancelUpstream()
}
