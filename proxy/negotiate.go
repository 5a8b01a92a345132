package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Negotiation: the first stage of a connection, before any user is known.
// A client may send, before its StartupMessage, an SSLRequest (answered
// 'S' and the connection upgraded when TLS is configured, 'N' otherwise),
// a GSSENCRequest (answered 'N': the proxy has no GSSAPI), or instead a
// CancelRequest on a connection of its own, which is forwarded to the
// session holding its key and ends the connection. A session's startup
// (below) and a connection refused over limits.max_connections
// (admission.go) both go through negotiate.

// errHandled ends a connection that needs no further answer (a
// CancelRequest, a client that went away during startup).
var errHandled = errors.New("connection handled")

// negotiate reads the client's startup packets and answers the requests
// that come before a StartupMessage. It returns the first other message
// (a StartupMessage, or anything else, which the caller refuses), with
// the connection and its backend, upgraded to TLS when tlsConfig is set
// and the client asked for it (the backend then reads at most maxBody
// bytes a message). A CancelRequest is forwarded (Server.cancel) and ends
// the connection with errHandled, as do more than rounds requests (0: no
// bound).
func (s *Server) negotiate(conn net.Conn, be *pgproto3.Backend, tlsConfig *tls.Config, maxBody, rounds int) (net.Conn, *pgproto3.Backend, pgproto3.FrontendMessage, error) {
	for i := 0; rounds <= 0 || i < rounds; i++ {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return conn, be, nil, err
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if tlsConfig == nil {
				if _, err := conn.Write([]byte{'N'}); err != nil {
					return conn, be, nil, err
				}
				continue
			}
			if _, err := conn.Write([]byte{'S'}); err != nil {
				return conn, be, nil, err
			}
			tc := tls.Server(conn, tlsConfig)
			if err := tc.Handshake(); err != nil {
				return conn, be, nil, fmt.Errorf("tls handshake: %w", err)
			}
			conn = tc
			be = pgproto3.NewBackend(tc, tc)
			be.SetMaxBodyLen(maxBody)
		case *pgproto3.GSSEncRequest:
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return conn, be, nil, err
			}
		case *pgproto3.CancelRequest:
			if len(m.SecretKey) == 4 {
				s.cancel(cancelKey{m.ProcessID, binary.BigEndian.Uint32(m.SecretKey)})
			}
			return conn, be, nil, errHandled
		default:
			return conn, be, msg, nil
		}
	}
	return conn, be, nil, errHandled
}

// startup runs the stages of a session before its message loop:
// negotiation, the protocol version, authentication (auth.go) and the
// upstream connection with the client's settings (begin.go), all within
// limits.auth_timeout.
func (ss *session) startup() error {
	ss.client.SetDeadline(time.Now().Add(ss.srv.lim.cfg.AuthTimeout))
	conn, be, msg, err := ss.srv.negotiate(ss.client, ss.backend, ss.srv.tls, ss.srv.opts.MaxMessageSize, 0)
	ss.client, ss.backend = conn, be
	if err != nil {
		return err
	}
	m, ok := msg.(*pgproto3.StartupMessage)
	if !ok {
		ss.send(fatalResponse(pgerr.ProtocolViolation, "expected a startup message"))
		ss.flush()
		return errHandled
	}
	if m.ProtocolVersion != pgproto3.ProtocolVersion30 {
		ss.send(fatalResponse(pgerr.ProtocolViolation, fmt.Sprintf("unsupported frontend protocol %d.%d: dpproxy speaks 3.0", m.ProtocolVersion>>16, m.ProtocolVersion&0xffff)))
		ss.flush()
		return errHandled
	}
	if err := ss.authenticate(m.Parameters["user"]); err != nil {
		return err
	}
	if err := ss.checkDatabase(m.Parameters); err != nil {
		return err
	}
	if err := ss.begin(m.Parameters); err != nil {
		return err
	}
	ss.client.SetDeadline(time.Time{})
	ss.readDeadline, ss.writeDeadline = time.Time{}, time.Time{}
	return nil
}

// checkDatabase refuses a startup whose database is not one of the
// configured names (conf.Databases, by default the upstream's database),
// as PostgreSQL refuses an unknown database: after authentication, so
// that only analysts learn which names exist. A startup without one
// names the user's name, as in PostgreSQL (libpq sends dbname = user).
func (ss *session) checkDatabase(params map[string]string) error {
	db := params["database"]
	if db == "" {
		db = params["user"]
	}
	if slices.Contains(ss.srv.databases, db) {
		return nil
	}
	ss.log.Info("connection refused: unknown database", "user", ss.user.Name)
	ss.send(fatalResponse(pgerr.InvalidCatalogName, fmt.Sprintf("database %q does not exist", db)))
	ss.flush()
	return errHandled
}
