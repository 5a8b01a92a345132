package pgerr

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sqlstateLiteral matches a quoted five-character SQLSTATE ("42501",
// "0A000", "XX000"); words such as "FATAL" have no digit and are skipped.
var sqlstateLiteral = regexp.MustCompile(`"[0-9A-Z]{5}"`)

// TestNoLiteralCodesOutsideThisPackage: the module's non-test code names
// SQLSTATEs only through this package's table, so that one file lists
// every code the proxy can send and none is mistyped.
func TestNoLiteralCodesOutsideThisPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if filepath.Base(filepath.Dir(path)) == "pgerr" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range sqlstateLiteral.FindAllString(line, -1) {
				if strings.ContainsAny(m, "0123456789") {
					t.Errorf("%s:%d: literal SQLSTATE %s: use a pgerr code", path, i+1, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
