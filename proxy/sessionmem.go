package proxy

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// What an idle session keeps in memory is multiplied by every connected
// client (bench/RESULTS.md, section 4: at most 32 KiB per idle session in
// session mode). Per-session structures that most sessions never use are
// made on first use, and the session's startup settings go upstream
// through pgconn, so that pgx's per-connection codec plans are never made
// for them (about 1.6 KiB per upstream connection, kept for its life).
// The client's read buffer is given back while the session is idle
// (sessionidle.go). TestIdleSessionMemory (e2e) holds the bound.

// setConfigSQL sets each named setting for the session: client values are
// bound parameters (two text[] literals), never SQL text.
const setConfigSQL = "SELECT set_config(n, v, false) FROM unnest($1::text[], $2::text[]) AS s(n, v)"

// setConfigs runs setConfigSQL on pc as an unnamed statement with text
// parameters.
func setConfigs(ctx context.Context, pc *pgconn.PgConn, names, values []string) error {
	_, err := pc.ExecParams(ctx, setConfigSQL, [][]byte{textArray(names), textArray(values)}, nil, nil, nil).Close()
	return err
}

// textArray is the text form of a text[] holding xs: every element
// quoted, with backslash before a double quote or a backslash, as
// PostgreSQL's array_in reads it.
func textArray(xs []string) []byte {
	n := 2
	for _, x := range xs {
		n += len(x) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		for j := 0; j < len(x); j++ {
			if c := x[j]; c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, x[j])
		}
		b = append(b, '"')
	}
	return append(b, '}')
}

// typeMap is the session's codec map for binary result formats
// (extended.go, convert), made when a client first asks for one.
func (ss *session) typeMap() *pgtype.Map {
	if ss.types == nil {
		ss.types = pgtype.NewMap()
	}
	return ss.types
}
