// Package golden reads the golden corpus of the rewriter
// (rewrite/testdata, laid out in rewrite/testdata/README.md): one
// NAME.sql per case in a directory per feature, its first line a
// one-line intent. The rewriter's golden tests, its fuzz seeds and the
// e2e differential test read the cases through it, so all of them see the
// same texts in the same order.
package golden

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IntentPrefix starts the first line of every case.
const IntentPrefix = "-- intent:"

// A Case is one golden case.
type Case struct {
	// Path is the case's .sql file; its golden output is next to it, with
	// the same name ending in .golden.
	Path string
	// Name is the file's base name without .sql (ok_… or refuse_…),
	// unique in the corpus.
	Name string
	// Intent is the text of the intent line, "" when the file has none.
	Intent string
	// SQL is the file without its intent line: what the tests analyse, so
	// that positions in errors and the keys of plans do not depend on it.
	SQL string
}

// Golden returns the path of the case's expected output.
func (c Case) Golden() string { return strings.TrimSuffix(c.Path, ".sql") + ".golden" }

// Cases reads every *.sql file under root, in every subdirectory, sorted
// by file name (the order of the flat directory the corpus used to be, so
// that corpora generated from the seeds do not change with the layout).
// Two cases with the same Name are an error.
func Cases(root string) ([]Case, error) {
	var cases []Case
	seen := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return nil
		}
		name := strings.TrimSuffix(d.Name(), ".sql")
		if other, ok := seen[name]; ok {
			return fmt.Errorf("golden case %s is both %s and %s", name, other, path)
		}
		seen[name] = path
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		intent, sql := Split(string(b))
		cases = append(cases, Case{Path: path, Name: name, Intent: intent, SQL: sql})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(cases, func(i, j int) bool { return filepath.Base(cases[i].Path) < filepath.Base(cases[j].Path) })
	return cases, nil
}

// Split separates a case file's intent line from its SQL: when text starts
// with IntentPrefix, the intent is the rest of that line, trimmed, and the
// SQL everything after it; otherwise the intent is "" and the SQL all of
// text.
func Split(text string) (intent, sql string) {
	if !strings.HasPrefix(text, IntentPrefix) {
		return "", text
	}
	line, rest, _ := strings.Cut(text, "\n")
	return strings.TrimSpace(strings.TrimPrefix(line, IntentPrefix)), rest
}
