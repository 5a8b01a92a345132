package dp_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/internal/golden"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

var update = flag.Bool("update", false, "rewrite ../rewrite/testdata/**/*.dp.golden from the current output")

// TestSpecGolden writes, next to every accepted rewrite case
// (../rewrite/testdata/**/ok_*.sql), the DP spec of its private and
// EXPLAIN DP statements as EXPLAIN DP prints it (sensitivities, ε/δ
// split, threshold, noise scale), with ε = 1 and δ = 1e-6 under Laplace
// and under Gaussian noise, and fails when a spec changes. No database:
// the output columns are named from the plan (a key's column, an
// aggregate's function), not as the database would describe them.
//
//	go test ./dp/ -update
func TestSpecGolden(t *testing.T) {
	a := newTestAnalyzer(t)
	cases, err := golden.Cases("../rewrite/testdata")
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, c := range cases {
		if !strings.HasPrefix(c.Name, "ok_") {
			continue
		}
		stmts, err := a.Analyze(c.SQL)
		if err != nil {
			continue // the rewrite's own golden test reports it
		}
		got := renderSpecs(stmts)
		if got == "" {
			continue // no private statement
		}
		written++
		t.Run(c.Name, func(t *testing.T) {
			path := strings.TrimSuffix(c.Path, ".sql") + ".dp.golden"
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./dp -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("spec of %s =\n%s\nwant\n%s", c.Path, got, want)
			}
		})
	}
	if written < 15 {
		t.Errorf("%d accepted cases have a private statement, want at least 15", written)
	}
}

// renderSpecs prints the spec of every private or EXPLAIN DP statement.
func renderSpecs(stmts []*rewrite.Statement) string {
	var b strings.Builder
	for i, st := range stmts {
		if st.Kind != rewrite.KindPrivate && st.Kind != rewrite.KindExplainDP {
			continue
		}
		for _, mech := range []string{conf.Laplace, conf.Gaussian} {
			fmt.Fprintf(&b, "-- statement %d, %s, ε=1 δ=1e-6\n", i+1, mech)
			p, err := dp.NewPrivacy(mech, 1, 1e-6)
			if err != nil {
				panic(err)
			}
			if len(st.Plan.Branches) > 0 {
				var specs []*dp.Spec
				for _, br := range st.Plan.Branches {
					s, err := dp.NewSpec(br, p)
					if err != nil {
						panic(err)
					}
					specs = append(specs, s)
				}
				u, err := dp.NewUnion(st.Plan, specs, math.Inf(1))
				if err != nil {
					fmt.Fprintf(&b, "ERROR: %v\n", err)
					continue
				}
				var names [][]string
				for _, br := range st.Plan.Branches {
					names = append(names, outputNames(br))
				}
				for _, l := range u.ExplainSpec(names) {
					b.WriteString(l + "\n")
				}
				continue
			}
			if st.Plan.Auto != nil { // bounds: auto, at the default share
				as, err := dp.NewAutoSpec(st.Plan, p, conf.DefaultAutoBoundsShare, noise.Laplace())
				if err != nil {
					fmt.Fprintf(&b, "ERROR: %v\n", err)
					continue
				}
				for _, l := range as.ExplainSpec(outputNames(st.Plan)) {
					b.WriteString(l + "\n")
				}
				continue
			}
			spec, err := dp.NewSpec(st.Plan, p)
			if err != nil {
				fmt.Fprintf(&b, "ERROR: %v\n", err)
				continue
			}
			for _, l := range spec.ExplainSpec(outputNames(st.Plan)) {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// outputNames names the plan's outputs without a database: as PostgreSQL
// would (Output.Name: the alias, or the column or function name), or, for
// the released columns of a plan with post-processing, a key by its
// column (or expression) and an aggregate by its function.
func outputNames(plan *rewrite.Plan) []string {
	names := make([]string, len(plan.Outputs))
	for i, o := range plan.Outputs {
		switch {
		case o.Name != "":
			names[i] = o.Name
		case o.Agg != nil:
			names[i] = o.Agg.Func
		case o.GroupKey >= 0 && plan.GroupKeys[o.GroupKey].Column != "":
			names[i] = plan.GroupKeys[o.GroupKey].Column
		case o.GroupKey >= 0:
			names[i] = plan.GroupKeys[o.GroupKey].Expr
		default:
			names[i] = fmt.Sprintf("column %d", i+1)
		}
	}
	return names
}
