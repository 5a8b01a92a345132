package rewrite

import (
	"errors"
	"testing"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// TestThreePartNamesOfTheDatabasesAliases: a client connected with one of
// conf.Databases (further names of the upstream's database) writes that
// name as the catalog of a three-part name (psqlODBC does); it names the
// same database as the upstream's own name, so both are the two-part
// name, and any other database is refused as PostgreSQL refuses it.
func TestThreePartNamesOfTheDatabasesAliases(t *testing.T) {
	base := newTestAnalyzer(t)
	cfg := *base.cfg
	cfg.Databases = []string{"clinic"}
	opts := base.opts
	opts.Database = "dpproxy_real_name"
	a := New(&cfg, opts)
	for _, sql := range []string{
		"SELECT count(*) FROM clinic.public.orders",
		"SELECT count(*) FROM dpproxy_real_name.public.orders",
		"SELECT name FROM clinic.public.products",
	} {
		if _, err := a.Analyze(sql); err != nil {
			t.Errorf("Analyze(%q): %v", sql, err)
		}
	}
	_, err := a.Analyze("SELECT count(*) FROM shop.public.orders")
	var re *RejectError
	if !errors.As(err, &re) || re.Code != pgerr.FeatureNotSupported {
		t.Errorf("another database: %v, want 0A000", err)
	}
}
