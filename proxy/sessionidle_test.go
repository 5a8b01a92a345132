package proxy

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestFrameReaderBoundaries: frameReader knows, after every read, whether
// what it handed out ends at a message boundary, whatever the reads'
// sizes: the startup packets (untyped, an SSLRequest before the
// StartupMessage), then typed messages, an empty one (Sync) among them.
// The idle release (sessionidle.go) drops a Backend only at one.
func TestFrameReaderBoundaries(t *testing.T) {
	var stream []byte
	var ends []int // offsets where a message ends
	add := func(b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b...)
		ends = append(ends, len(stream))
	}
	add((&pgproto3.SSLRequest{}).Encode(nil))
	add((&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "alice"}}).Encode(nil))
	add((&pgproto3.PasswordMessage{Password: "pw"}).Encode(nil))
	add((&pgproto3.Query{String: "SELECT 1"}).Encode(nil))
	add((&pgproto3.Parse{Query: "SELECT $1", ParameterOIDs: []uint32{23}}).Encode(nil))
	add((&pgproto3.Sync{}).Encode(nil))
	add((&pgproto3.Query{String: string(bytesOf('x', 20000))}).Encode(nil)) // longer than a read
	add((&pgproto3.Terminate{}).Encode(nil))
	atEnd := map[int]bool{0: true}
	for _, e := range ends {
		atEnd[e] = true
	}
	for _, chunk := range []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 64, 4096, 1 << 20} {
		server, client := net.Pipe()
		go func() {
			for off := 0; off < len(stream); off += chunk {
				client.Write(stream[off:min(off+chunk, len(stream))])
			}
			client.Close()
		}()
		f := &frameReader{conn: server}
		got := 0
		buf := make([]byte, 8192)
		for {
			n, err := f.Read(buf)
			got += n
			if boundary := f.nhdr == 0 && f.body == 0; boundary != atEnd[got] {
				t.Fatalf("chunks of %d, %d bytes handed out: at a boundary %v, want %v", chunk, got, boundary, atEnd[got])
			}
			if err != nil {
				// The read that found the end began at a boundary and
				// handed out nothing: clean, as after a timeout there.
				if n == 0 && !f.clean {
					t.Fatalf("chunks of %d: the last read is not clean", chunk)
				}
				break
			}
			if f.clean {
				t.Fatalf("chunks of %d: a read that handed out %d bytes is clean", chunk, n)
			}
		}
		if got != len(stream) || f.broken || !f.typed {
			t.Errorf("chunks of %d: %d of %d bytes, broken %v, typed %v", chunk, got, len(stream), f.broken, f.typed)
		}
		server.Close()
	}

	// A length no message can have: never at a boundary again.
	f := &frameReader{typed: true}
	var bad [5]byte
	bad[0] = 'Q'
	binary.BigEndian.PutUint32(bad[1:], 2)
	f.track(bad[:])
	if !f.broken {
		t.Error("a typed message of length 2 is not marked broken")
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
