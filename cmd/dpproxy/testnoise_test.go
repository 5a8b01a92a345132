package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// TestShippedBinaryCannotSwitchNoiseOff checks the walls around the
// test-only hook proxy.Options.TestNoise (proxy/testnoise.go), which the
// semantic differential test uses to release exact answers:
//
//   - the dpproxy binary does not link noise/noisetest, the only mechanism
//     that adds no noise;
//   - no non-test file outside package proxy names TestNoise or imports
//     noisetest, and inside proxy only testnoise.go reads the hook and
//     nothing assigns it;
//   - no configuration sets a mechanism other than laplace or gaussian,
//     and no configuration key reaches the hook;
//   - a program that is not a test binary and sets the hook anyway is
//     refused by proxy.New.
func TestShippedBinaryCannotSwitchNoiseOff(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the go tool is needed to list the binary's dependencies")
		}
		t.Skip("no go tool on PATH")
	}
	const hook = "github.com/dpproxy/dpproxy/noise/noisetest"

	t.Run("binary does not link noisetest", func(t *testing.T) {
		out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps: %v\n%s", err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 || !strings.Contains(string(out), "github.com/dpproxy/dpproxy/proxy") {
			t.Fatalf("go list -deps printed no plausible dependency list:\n%s", out)
		}
		for _, d := range deps {
			if d == hook {
				t.Errorf("cmd/dpproxy depends on %s: the shipped binary could switch noise off", hook)
			}
		}
	})

	t.Run("no non-test code sets the hook", func(t *testing.T) {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
			t.Fatalf("module root not found at %s: %v", root, err)
		}
		fset := token.NewFileSet()
		files := 0
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files++
			inNoisetest := strings.HasPrefix(rel, "noise/noisetest/")
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == hook && !inNoisetest {
					t.Errorf("%s imports %s, which only tests may", rel, hook)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.Ident:
					if x.Name != "TestNoise" {
						return true
					}
					if rel != "proxy/server.go" && rel != "proxy/testnoise.go" {
						t.Errorf("%s: %s names TestNoise: only proxy/testnoise.go may read the test-only hook", rel, fset.Position(x.Pos()))
					}
				case *ast.AssignStmt:
					for _, l := range x.Lhs {
						if se, ok := l.(*ast.SelectorExpr); ok && se.Sel.Name == "TestNoise" {
							t.Errorf("%s: %s assigns TestNoise", rel, fset.Position(se.Pos()))
						}
					}
				case *ast.KeyValueExpr:
					if k, ok := x.Key.(*ast.Ident); ok && k.Name == "TestNoise" {
						t.Errorf("%s: %s sets TestNoise", rel, fset.Position(k.Pos()))
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files < 20 {
			t.Fatalf("only %d Go files scanned under %s", files, root)
		}
	})

	t.Run("configuration cannot reach it", func(t *testing.T) {
		base := testconf.YAML(testconf.NoiseHook)
		if _, err := conf.Parse("ok.yaml", []byte(base), os.Getenv); err != nil {
			t.Fatalf("the base configuration must parse: %v", err)
		}
		for _, extra := range []string{
			"privacy: {mechanism: exact}",
			"privacy: {mechanism: none}",
			"privacy: {mechanism: noisetest}",
			"privacy: {test_noise: true}",
			"test_noise: true",
			"testnoise: exact",
			"noise: off",
		} {
			if _, err := conf.Parse("bad.yaml", []byte(base+extra+"\n"), os.Getenv); err == nil {
				t.Errorf("conf.Parse accepted %q", extra)
			}
		}
	})

	t.Run("refused outside a test binary", func(t *testing.T) {
		out, err := exec.Command(gobin, "run", "./testdata/testnoise").CombinedOutput()
		if err != nil {
			t.Fatalf("go run ./testdata/testnoise: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "Options.TestNoise is for tests only") {
			t.Errorf("proxy.New with TestNoise in a plain program: %s; want the refusal", out)
		}
	})
}
