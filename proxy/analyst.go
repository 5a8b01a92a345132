package proxy

import (
	"context"
	"strconv"

	"github.com/dpproxy/dpproxy/rewrite"
)

// The analyst's name (and the session's process id, for pg_backend_pid)
// upstream. A pass-through statement reads
// current_user, session_user, user and current_role from the upstream
// setting rewrite.AnalystSetting (rewrite/sessionuser.go), set to the
// analyst's name with the session's startup settings (begin.go). A client's
// RESET ALL or DISCARD ALL resets it (SET of it is refused); so after any
// statement that changes settings the proxy sets it again, only before a
// statement that reads it: one round trip for the rare session that does
// both.

// ensureAnalyst sets the analyst's name upstream again before sql runs,
// if sql reads it and a statement may have reset it since it was set.
func (ss *session) ensureAnalyst(ctx context.Context, sql string) {
	if !ss.analystStale || !rewrite.UsesAnalyst(sql) || ss.upBatch {
		return
	}
	pc := ss.upstream.Conn().PgConn()
	if pc.TxStatus() == 'E' {
		return // the statement fails anyway, with 25P02
	}
	_, err := pc.ExecParams(ctx, "SELECT pg_catalog.set_config($1, $2, false), pg_catalog.set_config($3, $4, false)",
		[][]byte{[]byte(rewrite.AnalystSetting), []byte(ss.user.Name),
			[]byte(rewrite.BackendPIDSetting), []byte(strconv.FormatUint(uint64(ss.key.pid), 10))}, nil, nil, nil).Close()
	// Set inside a transaction block, it is undone by a ROLLBACK: set it
	// again next time.
	if err == nil && pc.TxStatus() == 'I' {
		ss.analystStale = false
	}
}
