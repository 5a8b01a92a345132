package docs

import (
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/dpproxy/dpproxy/"

// TestDesignEdgesMatchImports: the import edges docs/design.md lists (its
// ```edges block) are the module's real imports of non-test code, as
// go list reports them, so the map of the packages cannot drift.
func TestDesignEdgesMatchImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	doc, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```edges\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("design.md has no ```edges block")
	}
	documented := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		from, to, ok := strings.Cut(line, "->")
		if !ok {
			t.Fatalf("edges line %q: want `pkg -> imports...`", line)
		}
		documented[strings.TrimSpace(from)] = sorted(strings.Fields(to))
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		pkg = strings.TrimPrefix(pkg, module)
		var own []string
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, module) {
				own = append(own, strings.TrimPrefix(imp, module))
			}
		}
		want, listed := documented[pkg]
		if !listed {
			if len(own) > 0 && !strings.HasPrefix(pkg, "internal/") && pkg != "bench" && pkg != "e2e" && !strings.HasSuffix(pkg, "test") {
				t.Errorf("design.md's edges omit %s, which imports %v", pkg, own)
			}
			continue
		}
		if got := sorted(own); got != want {
			t.Errorf("%s imports [%s]; design.md says [%s]", pkg, got, want)
		}
	}
}

func sorted(s []string) string {
	sort.Strings(s)
	return strings.Join(s, " ")
}
