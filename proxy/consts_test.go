package proxy

import (
	"testing"

	"github.com/dpproxy/dpproxy/rewrite"
)

// TestBoundParamsLayout: the rewritten SQL takes the client's parameters,
// then the hoisted constants (binary, with the types they came back with),
// then the seed (rewrite.Plan.SeedParam).
func TestBoundParamsLayout(t *testing.T) {
	plan := &rewrite.Plan{NumParams: 2, Consts: []rewrite.Const{{SQL: "now()", Param: 3}, {SQL: "1 + 1"}, {SQL: "current_date", Param: 4}}}
	p := &params{values: [][]byte{[]byte("a"), nil}, formats: []int16{0, 1}}
	cv := &constValues{params: []int{3, 4}, values: [][]byte{{1}, {2}}, oids: []uint32{1184, 1082}}
	values, formats, oids := boundParams(plan, p, []uint32{25, 23}, cv, [8]byte{1})
	if len(values) != 5 || plan.SeedParam() != 5 {
		t.Fatalf("%d parameters, seed $%d; want 5, $5", len(values), plan.SeedParam())
	}
	if string(values[0]) != "a" || values[1] != nil || formats[1] != 1 || oids[0] != 25 || oids[1] != 23 {
		t.Errorf("client parameters: %q %v %v", values[:2], formats[:2], oids[:2])
	}
	if values[2][0] != 1 || values[3][0] != 2 || formats[2] != 1 || formats[3] != 1 || oids[2] != 1184 || oids[3] != 1082 {
		t.Errorf("constants: %v %v %v", values[2:4], formats[2:4], oids[2:4])
	}
	if string(values[4]) != "1" || oids[4] != oidInt8 || formats[4] != 0 {
		t.Errorf("seed: %q %d %d", values[4], oids[4], formats[4])
	}
	// The answer cache tells different constants apart.
	other := &constValues{params: []int{3, 4}, values: [][]byte{{1}, {3}}, oids: []uint32{1184, 1082}}
	if cv.key() == other.key() || cv.key() == (&constValues{}).key() {
		t.Errorf("keys %q %q do not tell the constants apart", cv.key(), other.key())
	}
}
