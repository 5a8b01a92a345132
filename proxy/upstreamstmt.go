package proxy

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
	// render is the session's rewrite.RenderSettings when it was
	// prepared (part of key); "" for a twin of one Parse only.
	render string
}

// A twin's meaning is fixed when it is prepared: PostgreSQL converts a
// literal of a date/time or money type as it parses the text, under the
// session's DateStyle, IntervalStyle, TimeZone and lc_monetary, and
// 'now', 'today', 'tomorrow' and 'yesterday' to the time of parsing. A
// twin is thus shared, within a session and on a pooled backend among
// sessions (pool.go), only by Parses of the same text under the same
// rendering settings (red team, issue 17: another analyst's session got
// the meaning, and learnt the time zone, of the session that prepared the
// text first), and a text that may hold a literal read at the time of
// parsing is never shared: each Parse prepares its own twin, as
// PostgreSQL parses each Parse afresh (TestPoolTwinsKeepEachSessionsMeaning).

// upstreamStmtKey is a twin's key: its parameter types, the rendering
// settings it was prepared under (or the unique name of a twin of one
// Parse), then after the first NUL its text (replicas.go and pool.go read
// it back from there).
func upstreamStmtKey(sql string, oids []uint32, render string) string {
	return string(appendUpstreamStmtKey(nil, sql, oids, render))
}

// appendUpstreamStmtKey appends upstreamStmtKey's key to dst without fmt:
// the types as fmt prints a slice ("[23 25]"), 0x01, render, a NUL, the
// text.
func appendUpstreamStmtKey(dst []byte, sql string, oids []uint32, render string) []byte {
	dst = append(dst, '[')
	for i, o := range oids {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = strconv.AppendUint(dst, uint64(o), 10)
	}
	dst = append(append(append(dst, ']', 1), render...), 0)
	return append(dst, sql...)
}

// timeLiteralWords are the special date/time inputs that PostgreSQL reads
// as the time of parsing.
var timeLiteralWords = []string{"now", "today", "tomorrow", "yesterday"}

// mayReadParseTime reports whether the deparsed statement sql may hold a
// literal whose value is the time it is parsed: a string constant (or a
// dollar-quoted one, or anything after one the scan cannot follow) with
// one of timeLiteralWords in it, in any case. False positives only cost a
// Parse upstream.
func mayReadParseTime(sql string) bool {
	has := func(s string) bool {
		s = strings.ToLower(s)
		for _, w := range timeLiteralWords {
			if strings.Contains(s, w) {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case c == '"':
			j := strings.IndexByte(sql[i+1:], '"')
			if j < 0 {
				return has(sql[i:])
			}
			i += j + 1 // a doubled quote is two quoted names in a row
		case c == '$' && i+1 < len(sql) && (sql[i+1] < '0' || sql[i+1] > '9'):
			return has(sql[i:]) // a dollar quote, not a parameter
		case c == '\'':
			// E'...' escapes with a backslash; a doubled quote is a quote.
			// (The deparse writes no name right before a quote, but an E
			// ending a name is not an escape string either way.)
			escapes := i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i < 2 || !identChar(sql[i-2]))
			j := i + 1
			for ; j < len(sql); j++ {
				if escapes && sql[j] == '\\' {
					j++
					continue
				}
				if sql[j] == '\'' {
					if j+1 < len(sql) && sql[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if has(sql[i:min(j+1, len(sql))]) {
				return true
			}
			i = j
		}
	}
	return false
}

func identChar(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// prepareUpstream returns the twin of sql with the given parameter types,
// preparing it upstream if the session has none. The caller holds a
// reference and must give it back with releaseUpstreamStmt.
func (ss *session) prepareUpstream(ctx context.Context, sql string, oids []uint32) (*upstreamStmt, error) {
	render := ""
	if !mayReadParseTime(sql) && ss.upstream.Conn().PgConn().TxStatus() != 'E' {
		// (In an aborted block nothing can be read; a Parse there, of
		// ROLLBACK, gets a twin of its own.)
		var err error
		if render, err = ss.renderSettings(ctx); err != nil { // settings.go
			return nil, err
		}
	}
	var key string
	if render == "" {
		ss.upstreamSeq++
		key = upstreamStmtKey(sql, oids, fmt.Sprintf("once %d.%d", ss.id, ss.upstreamSeq))
	} else {
		// Looked up without making the key a string (a stack buffer, and
		// the compiler's map[string(bytes)] lookup): most Parses find theirs.
		var kb [256]byte
		kbuf := appendUpstreamStmtKey(kb[:0], sql, oids, render)
		if us, ok := ss.upstreamStmts[string(kbuf)]; ok {
			us.refs++
			return us, nil
		}
		key = string(kbuf)
	}
	if us, ok := ss.upstreamStmts[key]; ok {
		us.refs++
		return us, nil
	}
	name := ss.upstreamStmtName(key)                                          // pool.go
	paramOIDs, fields, err := ss.prepareTwin(ctx, name, key, sql, oids, true) // pool.go
	if err != nil {
		return nil, err
	}
	us := &upstreamStmt{key: key, name: name, paramOIDs: paramOIDs, fields: fields, refs: 1, render: render}
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
			if us.render != "" || ss.upstream == nil {
				continue // the backend keeps it for the sessions it serves (pool.go)
			}
			// A twin of one Parse serves no other: drop it where it is.
			b := backendOf(ss.upstream.Conn().PgConn())
			if bs, ok := b.stmts[us.name]; !ok || bs.key != key {
				continue
			}
			delete(b.stmts, us.name)
		}
		if err := ss.upstream.Conn().PgConn().Deallocate(ctx, us.name); err != nil {
			ss.log.Info("deallocate upstream statement", "err", err)
		}
	}
}
