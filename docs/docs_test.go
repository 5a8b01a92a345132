// Package docs holds dpproxy's documentation. Its test keeps the
// configuration reference in step with the configuration struct.
package docs

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

// placeholders name the keys of maps in the reference.
var placeholders = map[string]string{
	"tables":                 "<table>",
	"tables.<table>.columns": "<column>",
}

// configKeys walks the YAML tags of t and returns every key path, e.g.
// privacy.epsilon, auth.users[].name, tables.<table>.columns.<column>.lower.
func configKeys(t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out[path] = true
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.Struct:
			if ft.PkgPath() == "time" {
				continue
			}
			configKeys(ft, path, out)
		case reflect.Slice:
			if el := ft.Elem(); el.Kind() == reflect.Struct {
				configKeys(el, path+"[]", out)
			}
		case reflect.Map:
			el := ft.Elem()
			for el.Kind() == reflect.Pointer {
				el = el.Elem()
			}
			if el.Kind() == reflect.Struct {
				ph := placeholders[path]
				if ph == "" {
					ph = "<name>"
				}
				out[path+"."+ph] = true
				configKeys(el, path+"."+ph, out)
			}
		}
	}
}

var keyCell = regexp.MustCompile("^\\| `([^`]+)` \\|")

// TestConfigurationReferenceMatchesStruct fails when a key of conf.Config
// is missing from docs/configuration.md's reference table, or the table
// lists a key the configuration does not have.
func TestConfigurationReferenceMatchesStruct(t *testing.T) {
	want := map[string]bool{}
	configKeys(reflect.TypeOf(conf.Config{}), "", want)
	if len(want) < 20 {
		t.Fatalf("found only %d configuration keys: the walk is broken", len(want))
	}
	data, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	// The reference is the table under "## Keys", up to the next section.
	_, keys, ok := strings.Cut(string(data), "\n## Keys\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Keys" section`)
	}
	keys, _, _ = strings.Cut(keys, "\n## ")
	documented := map[string]bool{}
	for _, line := range strings.Split(keys, "\n") {
		if m := keyCell.FindStringSubmatch(line); m != nil {
			documented[m[1]] = true
		}
	}
	var missing, extra []string
	for k := range want {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, k := range missing {
		t.Errorf("configuration key %s is not in the reference table of docs/configuration.md", k)
	}
	for _, k := range extra {
		t.Errorf("docs/configuration.md documents %s, which conf.Config does not have", k)
	}
}

// TestDocsAreLinkedFromREADME keeps every page reachable from the README.
func TestDocsAreLinkedFromREADME(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if strings.HasSuffix(p.Name(), ".md") && !strings.Contains(string(readme), "docs/"+p.Name()) {
			t.Errorf("docs/%s is not linked from README.md", p.Name())
		}
	}
}
