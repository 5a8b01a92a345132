package bounds

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
)

// Querier runs the measurements' SQL (a pgx.Conn or pgx.Tx of the query
// role).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Options says what to measure and how.
type Options struct {
	// Table is the private table to measure ("schema.name" or "name");
	// "" measures every private table.
	Table string
	// Epsilon is the operator's ε for the whole run, split equally among
	// the histograms (ignored when Exact).
	Epsilon float64
	// Exact reads the histograms without noise: unprotected figures.
	Exact bool
	// GroupShare is the share of a table's rows each candidate is priced
	// on (Propose); 0 means DefaultGroupShare.
	GroupShare float64
	// GroupBy are further columns (without public values) whose groups
	// per unit to measure: "table.column" (schema.table.column), or
	// "column" for every table measured.
	GroupBy []string
}

// Measurement is one histogram to read: what it counts, its bins and the
// L1 sensitivity of its counts (what one unit can change in total).
type Measurement struct {
	Table  *conf.Table
	Kind   string // "rows", "pairs", "groups" or "values"
	Column string // pairs, groups, values
	L1     float64
}

// Plan lists the measurements for the chosen tables, in order: per table,
// rows per unit; per column with public values, rows per (unit, group)
// and groups per unit; per column with clamping bounds, its values.
func Plan(cfg *conf.Config, table string, groupBy ...string) ([]Measurement, error) {
	var tables []*conf.Table
	for _, t := range cfg.Tables {
		if t.Public {
			continue
		}
		if table != "" && !matches(t, table) {
			continue
		}
		tables = append(tables, t)
	}
	if len(tables) == 0 {
		if table != "" {
			return nil, fmt.Errorf("bounds: %s is not a private table of the configuration", table)
		}
		return nil, errors.New("bounds: the configuration has no private table")
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].QualifiedName() < tables[j].QualifiedName() })
	var out []Measurement
	for _, t := range tables {
		out = append(out, Measurement{Table: t, Kind: "rows", L1: 1})
		for _, c := range sortedColumns(t) {
			col := t.Columns[c]
			if col.PublicValues != nil {
				k := float64(len(col.PublicValues))
				out = append(out, Measurement{Table: t, Kind: "pairs", Column: c, L1: k},
					Measurement{Table: t, Kind: "groups", Column: c, L1: 1})
			}
			if col.HasBounds() {
				out = append(out, Measurement{Table: t, Kind: "values", Column: c, L1: float64(t.MaxRowsPerUnit)})
			}
		}
		for _, c := range groupBy {
			c = strings.ToLower(c)
			if i := strings.LastIndex(c, "."); i >= 0 {
				if !matches(t, c[:i]) {
					continue
				}
				c = c[i+1:]
			}
			if col := t.Columns[c]; col != nil && col.PublicValues != nil {
				continue // measured above
			}
			if !isIdent(c) || c == t.PrivacyUnit {
				return nil, fmt.Errorf("bounds: -group-by %s: not a column name other than the privacy unit", c)
			}
			out = append(out, Measurement{Table: t, Kind: "groups", Column: c, L1: 1})
		}
	}
	return out, nil
}

// public reports whether the measurement's column has public values.
func (m Measurement) public() bool {
	c := m.Table.Columns[m.Column]
	return c != nil && c.PublicValues != nil
}

// isIdent reports whether s is a plain lower-case SQL identifier.
func isIdent(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func matches(t *conf.Table, name string) bool {
	name = strings.ToLower(name)
	return name == t.QualifiedName() || (!strings.Contains(name, ".") && name == t.Name && t.Schema == "public")
}

func sortedColumns(t *conf.Table) []string {
	cols := make([]string, 0, len(t.Columns))
	for c := range t.Columns {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	return cols
}

// Fingerprint names what a run measures, for the ledger's record.
func Fingerprint(ms []Measurement) string {
	var names []string
	seen := map[string]bool{}
	for _, m := range ms {
		if q := m.Table.QualifiedName(); !seen[q] {
			seen[q] = true
			names = append(names, q)
		}
	}
	return "dpproxy bounds " + strings.Join(names, " ")
}

// Result is one histogram as released.
type Result struct {
	Measurement
	Hist   Hist   // rows, pairs, groups
	Signed Signed // values
	// Scale is the Laplace scale of each bin's noise (0 when exact) and
	// Floor the count below which a bin was taken as empty.
	Scale, Floor float64
}

// Measure reads every histogram of ms from q and noises each bin with
// the Laplace mechanism at eps/len(ms) (none when exact). The caller has
// charged eps to the ledger before calling it.
func Measure(ctx context.Context, q Querier, ms []Measurement, eps float64, exact bool) ([]Result, error) {
	share := eps / float64(len(ms))
	lap := noise.Laplace()
	var out []Result
	for _, m := range ms {
		r := Result{Measurement: m}
		add := func(x float64) (float64, error) { return x, nil }
		if !exact {
			r.Scale = m.L1 / share
			add = func(x float64) (float64, error) { return lap.Add(x, 1, m.L1, share, 0) }
		}
		switch m.Kind {
		case "rows", "pairs", "groups":
			bins := CountBins()
			if m.Kind == "groups" && m.public() {
				bins = GroupBins(len(m.Table.Columns[m.Column].PublicValues))
			}
			counts, mass, err := countHist(ctx, q, m, bins)
			if err != nil {
				return nil, err
			}
			if !exact {
				r.Floor = Floor(r.Scale, len(bins.Lo))
			}
			if r.Hist, err = Noised(bins, counts, add, r.Floor); err != nil {
				return nil, err
			}
			if exact {
				r.Hist.Mass = mass
			}
		case "values":
			bins := ValueBins()
			pos, neg, err := valueHist(ctx, q, m, bins)
			if err != nil {
				return nil, err
			}
			if !exact {
				r.Floor = Floor(r.Scale, 2*len(bins.Lo))
			}
			if r.Signed.Pos, err = Noised(bins, pos.count, add, r.Floor); err != nil {
				return nil, err
			}
			if r.Signed.Neg, err = Noised(bins, neg.count, add, r.Floor); err != nil {
				return nil, err
			}
			if exact {
				r.Signed.Pos.Mass, r.Signed.Neg.Mass = pos.mass, neg.mass
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// ident quotes an identifier of the configuration (conf checked it is a
// plain name) for SQL.
func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func tableSQL(t *conf.Table) string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// countHist reads the exact distribution of a per-unit count and bins it:
// each bin's count and the sum of its values. Every bin is returned, empty
// ones too: the bins are fixed in advance.
func countHist(ctx context.Context, q Querier, m Measurement, bins Bins) (count, mass []float64, err error) {
	unit, tbl := ident(m.Table.PrivacyUnit), tableSQL(m.Table)
	var sql string
	var args []any
	switch m.Kind {
	case "rows":
		sql = fmt.Sprintf(`SELECT n, count(*) FROM (SELECT count(*) AS n FROM %s GROUP BY %s) s GROUP BY n`, tbl, unit)
	case "pairs":
		col := ident(m.Column)
		sql = fmt.Sprintf(`SELECT n, count(*) FROM (SELECT count(*) AS n FROM %s WHERE %s::text = ANY($1) GROUP BY %s, %s) s GROUP BY n`, tbl, col, unit, col)
		args = append(args, m.Table.Columns[m.Column].PublicValues)
	case "groups":
		col := ident(m.Column)
		if m.public() {
			sql = fmt.Sprintf(`SELECT n, count(*) FROM (SELECT count(DISTINCT %s) AS n FROM %s WHERE %s::text = ANY($1) GROUP BY %s) s GROUP BY n`, col, tbl, col, unit)
			args = append(args, m.Table.Columns[m.Column].PublicValues)
		} else {
			// NULL is a group of its own, as in GROUP BY.
			sql = fmt.Sprintf(`SELECT n, count(*) FROM (SELECT count(DISTINCT %s) + max(CASE WHEN %s IS NULL THEN 1 ELSE 0 END) AS n FROM %s GROUP BY %s) s GROUP BY n`, col, col, tbl, unit)
		}
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("bounds: %s: %w", m.Table.QualifiedName(), err)
	}
	count, mass = make([]float64, len(bins.Lo)), make([]float64, len(bins.Lo))
	var n, c int64
	_, err = pgx.ForEachRow(rows, []any{&n, &c}, func() error {
		if i := bins.Index(float64(n)); i >= 0 {
			count[i] += float64(c)
			mass[i] += float64(n) * float64(c)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bounds: %s: %w", m.Table.QualifiedName(), err)
	}
	return count, mass, nil
}

// valueHist reads the binned values of a column, each unit's rows
// weighted by least(1, R/n) (R = max_rows_per_unit, n = the unit's rows
// with a value), so that a unit weighs at most R in all: the rows a query
// keeps, in expectation, as the rewrite bounds them.
func valueHist(ctx context.Context, q Querier, m Measurement, bins Bins) (pos, neg binned, err error) {
	unit, tbl, col := ident(m.Table.PrivacyUnit), tableSQL(m.Table), ident(m.Column)
	sql := fmt.Sprintf(`SELECT x < 0, width_bucket(abs(x), $1::float8[]), sum(w)::float8, sum(w * abs(x))::float8
		FROM (SELECT %s::float8 AS x, least(1, $2::float8 / count(*) OVER (PARTITION BY %s)) AS w FROM %s WHERE %s IS NOT NULL) s
		WHERE x <> 'NaN'::float8 AND abs(x) < 'Infinity'::float8 GROUP BY 1, 2`, col, unit, tbl, col)
	rows, err := q.Query(ctx, sql, bins.Lo[1:], float64(m.Table.MaxRowsPerUnit))
	if err != nil {
		return pos, neg, fmt.Errorf("bounds: %s.%s: %w", m.Table.QualifiedName(), m.Column, err)
	}
	pos, neg = newBinned(len(bins.Lo)), newBinned(len(bins.Lo))
	var isNeg bool
	var b int
	var w, wx float64
	_, err = pgx.ForEachRow(rows, []any{&isNeg, &b, &w, &wx}, func() error {
		// width_bucket over Lo[1:] is 0 below Lo[1] (bin 0), i for bin i.
		if b < 0 || b >= len(bins.Lo) || math.IsNaN(w) || math.IsNaN(wx) {
			return nil
		}
		side := pos
		if isNeg {
			side = neg
		}
		side.count[b] += w
		side.mass[b] += wx
		return nil
	})
	if err != nil {
		return pos, neg, fmt.Errorf("bounds: %s.%s: %w", m.Table.QualifiedName(), m.Column, err)
	}
	return pos, neg, nil
}

// binned is one side of a value histogram: per bin, the weight of its
// values and their weighted sum of |x|.
type binned struct{ count, mass []float64 }

func newBinned(n int) binned { return binned{make([]float64, n), make([]float64, n)} }
