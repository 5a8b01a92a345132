package proxy

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Upstream twins of pass-through prepared statements are shared within a
// session by text and parameter types. Most drivers (pgbench -M extended,
// pgJDBC, node-postgres, psycopg 3) send Parse of the unnamed statement
// before every execution: without sharing, each query would cost three
// upstream round trips (Parse, Deallocate of the previous twin, Execute)
// instead of one. A twin lives while a client statement uses it, and up to
// keptUpstreamStmts unused twins stay prepared for the next Parse of the
// same text.

// keptUpstreamStmts bounds the unused twins kept prepared per session.
const keptUpstreamStmts = 32

// upstreamStmt is a statement prepared on the session's upstream
// connection. It is owned by the session's goroutine.
type upstreamStmt struct {
	key       string
	name      string
	paramOIDs []uint32
	fields    []pgproto3.FieldDescription // nil: no rows
	refs      int                         // client statements using it
}

func upstreamStmtKey(sql string, oids []uint32) string {
	return string(appendUpstreamStmtKey(nil, sql, oids))
}

// appendUpstreamStmtKey appends the key of sql with oids to dst: the
// types as fmt prints a slice ("[23 25]"), a NUL, the text.
func appendUpstreamStmtKey(dst []byte, sql string, oids []uint32) []byte {
	dst = append(dst, '[')
	for i, o := range oids {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = strconv.AppendUint(dst, uint64(o), 10)
	}
	return append(append(dst, ']', 0), sql...)
}

// prepareUpstream returns the twin of sql with the given parameter types,
// preparing it upstream if the session has none. The caller holds a
// reference and must give it back with releaseUpstreamStmt.
func (ss *session) prepareUpstream(ctx context.Context, sql string, oids []uint32) (*upstreamStmt, error) {
	// Looked up without making the key a string (a stack buffer, and
	// the compiler's map[string(bytes)] lookup): most Parses find theirs.
	var kb [256]byte
	kbuf := appendUpstreamStmtKey(kb[:0], sql, oids)
	if us, ok := ss.upstreamStmts[string(kbuf)]; ok {
		us.refs++
		return us, nil
	}
	key := string(kbuf)
	name := ss.upstreamStmtName(key)                                    // pool.go
	paramOIDs, fields, err := ss.prepareTwin(ctx, name, key, sql, oids) // pool.go
	if err != nil {
		return nil, err
	}
	us := &upstreamStmt{key: key, name: name, paramOIDs: paramOIDs, fields: fields, refs: 1}
	if ss.upstreamStmts == nil {
		ss.upstreamStmts = map[string]*upstreamStmt{}
	}
	ss.upstreamStmts[key] = us
	ss.trimUpstreamStmts(ctx)
	return us, nil
}

// releaseUpstreamStmt gives back a reference taken by prepareUpstream.
func (ss *session) releaseUpstreamStmt(ctx context.Context, us *upstreamStmt) {
	us.refs--
	ss.trimUpstreamStmts(ctx)
}

// trimUpstreamStmts deallocates unused twins beyond keptUpstreamStmts.
func (ss *session) trimUpstreamStmts(ctx context.Context) {
	unused := 0
	for _, us := range ss.upstreamStmts {
		if us.refs <= 0 {
			unused++
		}
	}
	for key, us := range ss.upstreamStmts {
		if unused <= keptUpstreamStmts {
			return
		}
		if us.refs > 0 {
			continue
		}
		delete(ss.upstreamStmts, key)
		unused--
		if ss.pooled() {
			continue // the backend keeps it for the sessions it serves (pool.go)
		}
		if err := ss.upstream.Conn().PgConn().Deallocate(ctx, us.name); err != nil {
			ss.log.Info("deallocate upstream statement", "err", err)
		}
	}
}
