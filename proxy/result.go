package proxy

import (
	"math"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Results the proxy produces itself (everything but pass-through), and
// how they are sent: rows in the requested formats, a row limit, the
// notice after the command.

// Type OIDs the proxy encodes itself.
const (
	oidBool    = 16
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidFloat4  = 700
	oidFloat8  = 701
	oidNumeric = 1700
)

// result is an answer the proxy produced itself (everything but
// pass-through), in text format; the protocol layer sends it.
type result struct {
	fields []pgproto3.FieldDescription // nil: the statement returns no rows
	rows   [][][]byte
	tag    string
	notice string // sent after CommandComplete when set
	empty  bool   // an empty query string

	// noticeDetail is the notice's DETAIL: the contribution bounds and
	// their bias (bounds metadata), then the budget (tables.go); "" for none.
	noticeDetail string
}

// textResult builds a small result from strings.
func textResult(cols []string, oids []uint32, rows [][]string, tag string) *result {
	r := &result{tag: tag}
	for i, c := range cols {
		r.fields = append(r.fields, pgproto3.FieldDescription{Name: []byte(c), DataTypeOID: oids[i], DataTypeSize: typeSize(oids[i]), TypeModifier: -1})
	}
	for _, row := range rows {
		vals := make([][]byte, len(row))
		for i, v := range row {
			vals[i] = []byte(v)
		}
		r.rows = append(r.rows, vals)
	}
	return r
}

// sendRows sends r's rows from offset on, at most max of them (0: all),
// converted to the requested result formats. It returns the offset reached;
// when all rows are sent it also sends CommandComplete and the notice.
func (ss *session) sendRows(r *result, formats []int16, max int) (int, error) {
	return ss.sendRowsFrom(r, formats, 0, max)
}

func (ss *session) sendRowsFrom(r *result, formats []int16, offset, max int) (int, error) {
	i := offset
	for ; i < len(r.rows) && (max <= 0 || i-offset < max); i++ {
		row := r.rows[i]
		if len(formats) > 0 {
			conv := make([][]byte, len(row))
			for c, v := range row {
				var err error
				if conv[c], err = ss.convert(r.fields[c].DataTypeOID, formatOf(formats, c), v); err != nil {
					return i, err
				}
			}
			row = conv
		}
		ss.send(&pgproto3.DataRow{Values: row})
	}
	if i < len(r.rows) {
		ss.send(&pgproto3.PortalSuspended{})
		return i, nil
	}
	ss.send(&pgproto3.CommandComplete{CommandTag: []byte(r.tag)})
	if r.notice != "" {
		ss.send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: string(pgerr.SuccessfulCompletion), Message: r.notice, Detail: r.noticeDetail})
	}
	return i, nil
}

func typeSize(oid uint32) int16 {
	switch oid {
	case oidInt8, oidFloat8:
		return 8
	case oidInt4, oidFloat4:
		return 4
	case oidInt2:
		return 2
	case oidBool:
		return 1
	}
	return -1
}

// formatNum prints a float as PostgreSQL prints numeric: plain decimal,
// never an exponent, with the shortest digits that round-trip.
func formatNum(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
