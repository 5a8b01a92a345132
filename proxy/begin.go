package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// The last stage of a session's startup, after authentication (auth.go):
// the analyst's session is counted (limits.max_connections_per_analyst),
// takes its upstream connection with the client's settings, gets its
// cancel key (cancel.go) and is told it is ready.

// reportedParams are forwarded to the client as ParameterStatus.
var reportedParams = [...]string{"server_version", "server_encoding", "client_encoding", "application_name", "DateStyle", "IntervalStyle", "TimeZone", "integer_datetimes", "standard_conforming_strings", "default_transaction_read_only", "in_hot_standby"}

// begin acquires the session's upstream connection and completes startup.
func (ss *session) begin(params map[string]string) error {
	names, values, err := startupSettings(params, ss.srv.lim.cfg.StatementTimeout)
	if err != nil {
		ss.send(errorResponseFatal(err))
		ss.flush()
		return errHandled
	}
	// current_user and session_user name the analyst (analyst.go).
	names, values = append(names, rewrite.AnalystSetting), append(values, ss.user.Name)
	if !ss.srv.lim.enterAnalyst(ss.user.Name) {
		ss.log.Warn("connection refused: limits.max_connections_per_analyst reached", "user", ss.user.Name, "max", ss.srv.lim.cfg.MaxConnectionsPerAnalyst)
		ss.send(fatalResponse(pgerr.TooManyConnections, fmt.Sprintf("too many connections for analyst %q: at most %d at once (limits.max_connections_per_analyst)", ss.user.Name, ss.srv.lim.cfg.MaxConnectionsPerAnalyst)))
		ss.flush()
		return errHandled
	}
	ss.counted = true
	ctx, cancel := context.WithTimeout(context.Background(), ss.srv.lim.cfg.AuthTimeout)
	defer cancel()
	up, err := ss.srv.acquireQuery(ctx) // replicas.go
	if err != nil {
		ss.log.Error("upstream unavailable", "err", err)
		ss.send(fatalResponse(pgerr.ConnectionFailure, "dpproxy cannot reach its database"))
		ss.flush()
		return errHandled
	}
	ss.upstream = up
	ss.srv.mu.Lock()
	ss.srv.upstreams[up.Conn().PgConn()] = ss
	ss.srv.mu.Unlock()
	if ss.key, err = ss.srv.register(ss); err != nil {
		return err
	}
	// pg_backend_pid() is the process id the client is given in
	// BackendKeyData (analyst.go).
	names, values = append(names, rewrite.BackendPIDSetting), append(values, strconv.FormatUint(uint64(ss.key.pid), 10))
	ss.settings = [2][]string{names, values}

	if ss.pooled() {
		// A shared backend: what another session set is reset too.
		err = ss.restoreOnBackend(ctx) // pool.go
	} else if len(names) > 0 {
		// set_config with bound parameters: client values never become SQL text.
		// An unnamed statement: a named one would outlive the DISCARD ALL
		// of releaseUpstream, and the next session on this connection
		// would fail on a prepared statement that no longer exists. Through
		// pgconn: pgx would keep codec plans for the arrays for the
		// connection's life (sessionmem.go).
		err = setConfigs(ctx, up.Conn().PgConn(), names, values)
	}
	if err != nil {
		ss.send(errorResponseFatal(err))
		ss.flush()
		return errHandled
	}
	ss.send(&pgproto3.AuthenticationOk{})
	ss.sendParameterChanges(true)
	ss.send(&pgproto3.ParameterStatus{Name: "session_authorization", Value: ss.user.Name})
	ss.send(&pgproto3.ParameterStatus{Name: "is_superuser", Value: "off"})
	var secret [4]byte
	binary.BigEndian.PutUint32(secret[:], ss.key.secret)
	ss.send(&pgproto3.BackendKeyData{ProcessID: ss.key.pid, SecretKey: secret[:]})
	ss.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := ss.flush(); err != nil {
		return err
	}
	ss.giveBackBackend(ctx) // pool.go: an idle session holds no backend
	return nil
}

func errorResponseFatal(err error) *pgproto3.ErrorResponse {
	r := errorResponse(err)
	r.Severity, r.SeverityUnlocalized = "FATAL", "FATAL"
	return r
}

// sendParameterChanges forwards upstream parameters the client has not seen
// in their current value (all of them at startup).
func (ss *session) sendParameterChanges(all bool) {
	pc := ss.upstream.Conn().PgConn()
	for i, k := range reportedParams {
		v := pc.ParameterStatus(k)
		if v == "" {
			continue
		}
		if all || ss.sentParams[i] != v {
			ss.sentParams[i] = v
			ss.send(&pgproto3.ParameterStatus{Name: k, Value: v})
		}
	}
}
