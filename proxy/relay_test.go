package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The pass-through path's allocation cuts (passthrough.go, extended.go,
// upstreamstmt.go, shapecache.go) keep what they replaced.

// TestUpstreamStmtKeyFormat: the key built without fmt is the one fmt
// built (pool.go names shared backends' statements by it).
func TestUpstreamStmtKeyFormat(t *testing.T) {
	for _, oids := range [][]uint32{nil, {}, {23}, {23, 25, 4294967295}} {
		want := fmt.Sprint(oids) + "\x01" + "UTC" + "\x00" + "SELECT $1"
		if got := upstreamStmtKey("SELECT $1", oids, "UTC"); got != want {
			t.Errorf("upstreamStmtKey(%v) = %q, want %q", oids, got, want)
		}
	}
}

// TestBindCopiesParameters: a bound portal keeps its own copies of the
// values, a NULL stays NULL and an empty value stays empty, not NULL.
func TestBindCopiesParameters(t *testing.T) {
	ss := &session{statements: map[string]*prepared{"s": {paramOIDs: []uint32{25, 25, 25}}}, portals: map[string]*portal{},
		backend: pgproto3.NewBackend(strings.NewReader(""), &bytes.Buffer{})}
	vals := [][]byte{[]byte("abc"), {}, nil}
	if err := ss.bind(&pgproto3.Bind{PreparedStatement: "s", Parameters: vals}); err != nil {
		t.Fatal(err)
	}
	vals[0][0] = 'X' // the message's buffer, reused by the next Receive
	p := ss.portals[""].params
	if string(p.values[0]) != "abc" || p.values[1] == nil || len(p.values[1]) != 0 || p.values[2] != nil {
		t.Errorf("bound values %q (nil: %v %v %v), want abc, empty, NULL", p.values, p.values[0] == nil, p.values[1] == nil, p.values[2] == nil)
	}
	if cap(p.values[0]) != 3 {
		t.Errorf("a value's capacity is %d: appending to it would overwrite the next", cap(p.values[0]))
	}
}

// TestSendFieldsKeepsShared: describing a portal with binary results
// changes the message sent, never the statement's fields.
func TestSendFieldsKeepsShared(t *testing.T) {
	var out bytes.Buffer
	ss := &session{backend: pgproto3.NewBackend(strings.NewReader(""), &out)}
	fields := []pgproto3.FieldDescription{{Name: []byte("a"), DataTypeOID: 23}, {Name: []byte("b"), DataTypeOID: 23}}
	ss.sendFields(fields, []int16{0, 1})
	ss.sendFields(fields, nil)
	if fields[0].Format != 0 || fields[1].Format != 0 {
		t.Errorf("the statement's fields were changed: %+v", fields)
	}
	ss.backend.Flush()
	fe := pgproto3.NewFrontend(&out, &bytes.Buffer{})
	for i, want := range [][]int16{{0, 1}, {0, 0}} {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		rd := msg.(*pgproto3.RowDescription)
		if rd.Fields[0].Format != want[0] || rd.Fields[1].Format != want[1] {
			t.Errorf("description %d has formats %d, %d, want %v", i, rd.Fields[0].Format, rd.Fields[1].Format, want)
		}
	}
}

// TestNormalizeInts: integers are printed as the deparse prints them,
// without allocating when they are already.
func TestNormalizeInts(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"0", "12", "999999999"}, []string{"0", "12", "999999999"}},
		{[]string{"007", "10"}, []string{"7", "10"}},
		{[]string{"00"}, []string{"0"}},
	} {
		if got := normalizeInts(c.in); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("normalizeInts(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { normalizeInts([]string{"1", "23"}) }); n != 0 {
		t.Errorf("normalizeInts of normal integers allocates %v times", n)
	}
}

// TestReadyForQuery: the shared messages say what they should.
func TestReadyForQuery(t *testing.T) {
	for _, s := range []byte("ITEX") {
		if got := readyForQuery(s).TxStatus; got != s {
			t.Errorf("readyForQuery(%c) has status %c", s, got)
		}
	}
}
