package proxy

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// COPY (query) TO STDOUT (rewrite/copy.go), psql's \copy (SELECT …) TO
// 'file'. The proxy writes the COPY stream itself, byte for byte as
// PostgreSQL's COPY would (src/backend/commands/copyto.c), from the rows
// of the query: a DP query's released rows (answered, noised and charged
// like the SELECT), or a pass-through query's rows in text format, relayed
// as they arrive. Only a simple Query carries it (as psql sends it).

// copyOut answers a COPY (query) TO STDOUT of a simple query.
func (ss *session) copyOut(ctx context.Context, st *rewrite.Statement) error {
	if st.Kind != rewrite.KindPassThrough && st.Kind != rewrite.KindPrivate {
		return refuse(pgerr.FeatureNotSupported, "COPY applies to a query only")
	}
	if st.Kind == rewrite.KindPrivate {
		r, err := ss.execute(ctx, st, nil, nil)
		if err != nil {
			return err
		}
		w := newCopyWriter(st.Copy, len(r.fields))
		ss.send(w.response())
		if st.Copy.Header {
			ss.send(w.header(r.fields))
		}
		for _, row := range r.rows {
			ss.send(w.row(row))
		}
		ss.send(&pgproto3.CopyDone{})
		ss.send(&pgproto3.CommandComplete{CommandTag: []byte("COPY " + strconv.Itoa(len(r.rows)))})
		if r.notice != "" {
			ss.send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: string(pgerr.SuccessfulCompletion), Message: r.notice, Detail: r.noticeDetail})
		}
		return nil
	}
	ss.ensureAnalyst(ctx, st.SQL) // analyst.go
	defer upstreamTimer(ctx)()
	pc := ss.upstream.Conn().PgConn()
	mrr := pc.Exec(ctx, st.SQL)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		fds := rr.FieldDescriptions()
		w := newCopyWriter(st.Copy, len(fds))
		ss.send(w.response())
		if st.Copy.Header {
			fields := make([]pgproto3.FieldDescription, len(fds))
			for i, fd := range fds {
				fields[i].Name = []byte(fd.Name)
			}
			ss.send(w.header(fields))
		}
		n := 0
		for rr.NextRow() {
			ss.send(w.row(rr.Values()))
			if n++; n%1024 == 0 {
				if err := ss.flush(); err != nil {
					ss.abandonUpstream() // as relayUpstream does
					return fmt.Errorf("%w: %w", errClientGone, err)
				}
			}
		}
		if _, err := rr.Close(); err != nil {
			mrr.Close()
			return canceled(ctx, err)
		}
		ss.send(&pgproto3.CopyDone{})
		ss.send(&pgproto3.CommandComplete{CommandTag: []byte("COPY " + strconv.Itoa(n))})
	}
	return canceled(ctx, mrr.Close())
}

// copyWriter encodes rows of text values as PostgreSQL's COPY TO does.
type copyWriter struct {
	f    *rewrite.CopyOut
	cols int
	buf  bytes.Buffer
}

func newCopyWriter(f *rewrite.CopyOut, cols int) *copyWriter {
	return &copyWriter{f: f, cols: cols}
}

func (w *copyWriter) response() *pgproto3.CopyOutResponse {
	return &pgproto3.CopyOutResponse{OverallFormat: 0, ColumnFormatCodes: make([]uint16, w.cols)}
}

func (w *copyWriter) header(fields []pgproto3.FieldDescription) *pgproto3.CopyData {
	vals := make([][]byte, len(fields))
	for i, f := range fields {
		vals[i] = f.Name
		if vals[i] == nil {
			vals[i] = []byte{}
		}
	}
	return w.row(vals)
}

// row encodes one row; a nil value is NULL.
func (w *copyWriter) row(vals [][]byte) *pgproto3.CopyData {
	w.buf.Reset()
	for i, v := range vals {
		if i > 0 {
			w.buf.WriteByte(w.f.Delimiter)
		}
		switch {
		case v == nil:
			w.buf.WriteString(w.f.Null)
		case w.f.CSV:
			w.csv(v, len(vals) == 1)
		default:
			w.text(v)
		}
	}
	w.buf.WriteByte('\n')
	return &pgproto3.CopyData{Data: append([]byte(nil), w.buf.Bytes()...)}
}

// text is CopyAttributeOutText: backslash escapes for control
// characters, the backslash and the delimiter.
func (w *copyWriter) text(v []byte) {
	d := w.f.Delimiter
	for _, c := range v {
		if c < 0x20 {
			e := byte(0)
			switch c {
			case '\b':
				e = 'b'
			case '\f':
				e = 'f'
			case '\n':
				e = 'n'
			case '\r':
				e = 'r'
			case '\t':
				e = 't'
			case '\v':
				e = 'v'
			}
			switch {
			case e != 0:
				w.buf.WriteByte('\\')
				w.buf.WriteByte(e)
			case c == d:
				w.buf.WriteByte('\\')
				w.buf.WriteByte(c)
			default:
				w.buf.WriteByte(c)
			}
			continue
		}
		if c == '\\' || c == d {
			w.buf.WriteByte('\\')
		}
		w.buf.WriteByte(c)
	}
}

// csv is CopyAttributeOutCSV: quoted when the value is the NULL string,
// holds the delimiter, the quote or a line break, or is \. alone in a
// one-column row; quotes and escapes inside are escaped.
func (w *copyWriter) csv(v []byte, single bool) {
	q, e := w.f.Quote, w.f.Escape
	quote := string(v) == w.f.Null || single && string(v) == `\.` ||
		bytes.IndexByte(v, w.f.Delimiter) >= 0 || bytes.IndexByte(v, q) >= 0 || bytes.ContainsAny(v, "\r\n")
	if !quote {
		w.buf.Write(v)
		return
	}
	w.buf.WriteByte(q)
	for _, c := range v {
		if c == q || c == e {
			w.buf.WriteByte(e)
		}
		w.buf.WriteByte(c)
	}
	w.buf.WriteByte(q)
}
