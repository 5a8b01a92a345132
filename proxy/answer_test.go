package proxy

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/sensitivity"
)

func TestStoredAnswerRoundTrip(t *testing.T) {
	a := &answer{
		fields: []pgproto3.FieldDescription{
			{Name: []byte("region"), DataTypeOID: oidText, DataTypeSize: -1, TypeModifier: -1},
			{Name: []byte("count"), DataTypeOID: oidInt8, DataTypeSize: 8, TypeModifier: -1, TableOID: 7, TableAttributeNumber: 2},
		},
		// A NULL key, an empty-string key and binary bytes stay distinct.
		rows:    [][][]byte{{nil, []byte("3")}, {[]byte{}, []byte("4")}, {[]byte("\x00\xffé"), []byte("5")}},
		charged: sensitivity.Share{Epsilon: 0.1, Delta: 1e-7},
		bounds:  "count: ±3",
	}
	b, err := encodeAnswer(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Errorf("decodeAnswer(encodeAnswer(a)) = %+v, want %+v", got, a)
	}
	for _, bad := range []string{`{"v":2}`, `not json`, `{"v":1,"fields":[{"name":"a"}],"rows":[["MQ==","Mg=="]]}`} {
		if _, err := decodeAnswer([]byte(bad)); err == nil {
			t.Errorf("decodeAnswer(%s) succeeded", bad)
		}
	}
}
