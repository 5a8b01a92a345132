package dp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/dpproxy/dpproxy/rewrite"
)

// TestEveryAggKindRegistered: every aggregate kind the rewriter can
// produce (each constant of type AggKind in rewrite/plan.go) has a
// constructor in the registry, so adding a kind to the rewriter without
// its file here fails.
func TestEveryAggKindRegistered(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../rewrite/plan.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || len(g.Specs) == 0 {
			continue
		}
		first := g.Specs[0].(*ast.ValueSpec)
		if id, ok := first.Type.(*ast.Ident); !ok || id.Name != "AggKind" {
			continue
		}
		// The block is AggKind = iota + 1, then one name per line.
		if b, ok := first.Values[0].(*ast.BinaryExpr); !ok || b.Op != token.ADD {
			t.Fatal("rewrite/plan.go's AggKind constants no longer start at iota + 1: update this test")
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if s != first && len(vs.Values) > 0 {
				t.Fatalf("AggKind constant %s has its own value: update this test", vs.Names[0])
			}
			for _, n := range vs.Names {
				names = append(names, n.Name)
			}
		}
	}
	if len(names) < 7 {
		t.Fatalf("found %d AggKind constants in rewrite/plan.go (%v), want at least 7", len(names), names)
	}
	for i, n := range names {
		if !Registered(rewrite.AggKind(i + 1)) {
			t.Errorf("rewrite.%s (%d) has no aggregator registered in package dp", n, i+1)
		}
	}
	if Registered(rewrite.AggKind(len(names) + 1)) {
		t.Errorf("a kind past the last AggKind constant is registered")
	}
}
