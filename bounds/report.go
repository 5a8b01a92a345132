package bounds

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/noise"
)

// TableProposal is what the measurements of one table propose.
type TableProposal struct {
	Table     *conf.Table
	Rows      Result
	RowsTrade []Row
	// MaxRows is the chosen max_rows_per_unit's row.
	MaxRows Row
	Groups  []GroupProposal
	// MaxGroups is the proposed max_groups_per_unit: the largest chosen
	// for a column with public values, or the current bound without one.
	MaxGroups int64
	Columns   []ColumnProposal
}

// GroupProposal is one column with public values.
type GroupProposal struct {
	Column     string
	K          int
	Pairs      Result
	PairsTrade []Row // max_rows_per_unit inside one group
	Groups     Result
	GroupTrade []Row
	Chosen     Row
}

// ColumnProposal is one column with clamping bounds.
type ColumnProposal struct {
	Column string
	Values Result
	Trade  []Row
	Chosen Row
}

// NoiseAt is the 95% noise bound of one aggregate at the configuration's
// default ε (all of it: a query with one aggregate), mechanism and δ.
func NoiseAt(cfg *conf.Config) (Noise95, error) {
	m, err := noise.ByName(cfg.Privacy.Mechanism)
	if err != nil {
		return nil, err
	}
	delta := 0.0
	if cfg.Privacy.Mechanism == conf.Gaussian {
		delta = cfg.Privacy.Delta
	}
	return func(l0 int64, lInf float64) (float64, error) {
		if lInf <= 0 {
			return 0, nil
		}
		return m.ErrorBound(l0, lInf, cfg.Privacy.Epsilon, delta, 0.95)
	}, nil
}

// DefaultGroupShare is the share of a table's rows the proposal prices
// each candidate on (Options.GroupShare).
const DefaultGroupShare = 0.1

// Propose turns the results of Measure into one proposal per table. Each
// bound minimizes, over its candidates, the bias plus the 95% noise of
// one aggregate over a group holding a share g of the table's rows: the
// bias is a share of the group, the noise is not, so a small g favours
// small bounds and g = 1 (the whole table) the largest.
func Propose(results []Result, n95 Noise95, groupShare float64) ([]TableProposal, error) {
	var out []TableProposal
	var cur *TableProposal
	for _, r := range results {
		if cur == nil || cur.Table != r.Table {
			out = append(out, TableProposal{Table: r.Table, MaxGroups: r.Table.MaxGroupsPerUnit})
			cur = &out[len(out)-1]
		}
		var err error
		switch r.Kind {
		case "rows":
			cur.Rows = r
			if cur.RowsTrade, err = RowsTradeoff(r.Hist, RowCandidates(r.Hist, r.Table.MaxRowsPerUnit), groupShare, n95); err != nil {
				return nil, err
			}
			cur.MaxRows = Best(cur.RowsTrade)
		case "pairs":
			g := GroupProposal{Column: r.Column, K: len(r.Table.Columns[r.Column].PublicValues), Pairs: r}
			if g.PairsTrade, err = RowsTradeoff(r.Hist, RowCandidates(r.Hist, r.Table.MaxRowsPerUnit), groupShare, n95); err != nil {
				return nil, err
			}
			cur.Groups = append(cur.Groups, g)
		case "groups":
			if !r.public() {
				cur.Groups = append(cur.Groups, GroupProposal{Column: r.Column})
			}
			g := &cur.Groups[len(cur.Groups)-1]
			g.Groups = r
			cands := GroupCandidates(r.Hist, g.K, r.Table.MaxGroupsPerUnit)
			if g.GroupTrade, err = GroupsTradeoff(r.Hist, cands, cur.MaxRows.Bound, groupShare*cur.Rows.Hist.Total(), n95); err != nil {
				return nil, err
			}
			g.Chosen = Best(g.GroupTrade)
		case "values":
			c := ColumnProposal{Column: r.Column, Values: r}
			if c.Trade, c.Chosen, err = ClampTradeoff(r.Signed, cur.MaxRows.Bound, groupShare, n95); err != nil {
				return nil, err
			}
			cur.Columns = append(cur.Columns, c)
		}
	}
	for i := range out {
		t := &out[i]
		if len(t.Groups) > 0 {
			t.MaxGroups = 0
			for _, g := range t.Groups {
				t.MaxGroups = max(t.MaxGroups, int64(g.Chosen.Bound))
			}
		}
	}
	return out, nil
}

// GroupsDropped is the share of (unit, group) pairs of column c that the
// proposed max_groups_per_unit drops.
func (t *TableProposal) GroupsDropped(g GroupProposal) float64 {
	for _, r := range g.GroupTrade {
		if int64(r.Bound) == t.MaxGroups {
			return r.DroppedShare
		}
	}
	return 0
}

// Print writes the proposals and their trade-offs, each candidate priced
// on a group of groupShare of the rows.
func Print(w io.Writer, cfg *conf.Config, props []TableProposal, groupShare float64) {
	eps := num(cfg.Privacy.Epsilon)
	gp := pct(groupShare)
	fmt.Fprintf(w, "Each candidate is priced on one aggregate over a group holding %s of the table's rows (-group-share):\n", gp)
	fmt.Fprintf(w, "the bias there (the dropped share of the group) next to the 95%% noise bound at the default ε=%s (%s).\n", eps, cfg.Privacy.Mechanism)
	fmt.Fprintln(w, "The proposal minimizes their sum; smaller groups favour smaller bounds, the whole table the largest.")
	for _, t := range props {
		tbl := t.Table
		fmt.Fprintf(w, "\n%s (privacy unit %s)\n", tbl.QualifiedName(), tbl.PrivacyUnit)
		h := t.Rows.Hist
		fmt.Fprintf(w, "  rows per unit: about %s units, %s rows; median %s, 90th percentile %s, 99th %s%s\n",
			count(h.Units()), count(h.Total()), num(h.Quantile(0.5)), num(h.Quantile(0.9)), num(h.Quantile(0.99)), floorNote(t.Rows))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "    max_rows_per_unit\trows dropped (no GROUP BY; in %s of the rows)\tnoise of count(*), 95%%\tbias + noise\t\n", gp)
		for _, r := range Shown(t.RowsTrade, 14, float64(tbl.MaxRowsPerUnit), t.MaxRows.Bound) {
			fmt.Fprintf(tw, "    %s%s\t%s (%s)\t±%s\t%s\t\n", num(r.Bound), mark(r.Bound, float64(tbl.MaxRowsPerUnit), t.MaxRows.Bound),
				pct(r.DroppedShare), count(r.Dropped), count(r.Noise), count(r.Cost()))
		}
		tw.Flush()
		for _, g := range t.Groups {
			if g.K > 0 {
				ph := g.Pairs.Hist
				fmt.Fprintf(w, "  rows per unit per %s (%d public values): median %s, 90th percentile %s, 99th %s; max_rows_per_unit %s drops %s of them\n",
					g.Column, g.K, num(ph.Quantile(0.5)), num(ph.Quantile(0.9)), num(ph.Quantile(0.99)), num(t.MaxRows.Bound), pct(share(ph.Excess(t.MaxRows.Bound), ph.Total())))
			}
			fmt.Fprintf(w, "  groups of %s per unit%s:\n", g.Column, floorNote(g.Groups))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "    max_groups_per_unit\t(unit, %s) pairs dropped (in a group of %s of the rows)\tnoise of its count(*), 95%%\tbias + noise\t\n", g.Column, gp)
			for _, r := range Shown(g.GroupTrade, 12, float64(tbl.MaxGroupsPerUnit), g.Chosen.Bound) {
				fmt.Fprintf(tw, "    %s%s\t%s (%s)\t±%s\t%s\t\n", num(r.Bound), mark(r.Bound, float64(tbl.MaxGroupsPerUnit), g.Chosen.Bound),
					pct(r.DroppedShare), count(r.Dropped), count(r.Noise), count(r.Cost()))
			}
			tw.Flush()
		}
		for _, c := range t.Columns {
			col := tbl.Columns[c.Column]
			fmt.Fprintf(w, "  %s: %s of its absolute sum is in negative values%s\n", c.Column,
				pct(share(c.Values.Signed.Neg.Total(), c.Values.Signed.AbsTotal())), floorNote(c.Values))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "    [lower, upper]\tsum changed by clamping (in %s of the rows)\tnoise of sum(%s), 95%%\tbias + noise\t\n", gp, c.Column)
			curRow := Row{Bound: *col.Upper, Lower: *col.Lower}
			if n95, err := NoiseAt(cfg); err == nil {
				curRow.Noise, _ = n95(1, t.MaxRows.Bound*math.Max(math.Abs(*col.Lower), math.Abs(*col.Upper)))
			}
			curRow.DroppedShare = share(c.Values.Signed.Clamped(*col.Lower, *col.Upper), c.Values.Signed.AbsTotal())
			curRow.Dropped = curRow.DroppedShare * groupShare * c.Values.Signed.AbsTotal()
			rows := append(Shown(c.Trade, 12, c.Chosen.Bound), curRow)
			for _, r := range rows {
				m := ""
				switch {
				case r.Bound == c.Chosen.Bound && r.Lower == c.Chosen.Lower:
					m = " <- proposed"
				case r.Bound == curRow.Bound && r.Lower == curRow.Lower:
					m = " (current)"
				}
				fmt.Fprintf(tw, "    [%s, %s]%s\t%s (%s)\t±%s\t%s\t\n", num(r.Lower), num(r.Bound), m, pct(r.DroppedShare), count(r.Dropped), count(r.Noise), count(r.Cost()))
			}
			tw.Flush()
		}
	}
	fmt.Fprintln(w, "\nProposed bounds, with the bias they cause:")
	for _, t := range props {
		note := ""
		if t.Rows.Scale > 0 {
			note = fmt.Sprintf(" (DP: a tail of bins of fewer than %s units each is not seen, nor the rows it holds)", count(t.Rows.Floor))
		}
		fmt.Fprintf(w, "  %s:\n    max_rows_per_unit: %s    # rows dropped: %s%s\n    max_groups_per_unit: %d\n",
			t.Table.QualifiedName(), num(t.MaxRows.Bound), pct(t.MaxRows.DroppedShare), note, t.MaxGroups)
		for _, g := range t.Groups {
			fmt.Fprintf(w, "    #   %s: (unit, group) pairs dropped: %s\n", g.Column, pct(t.GroupsDropped(g)))
		}
		for _, c := range t.Columns {
			fmt.Fprintf(w, "    %s: {lower: %s, upper: %s}    # sum changed by clamping: %s\n", c.Column, num(c.Chosen.Lower), num(c.Chosen.Bound), pct(c.Chosen.DroppedShare))
		}
	}
}

func mark(b, current, chosen float64) string {
	switch {
	case b == chosen && b == current:
		return " (current, proposed)"
	case b == chosen:
		return " <- proposed"
	case b == current:
		return " (current)"
	}
	return ""
}

func floorNote(r Result) string {
	if r.Scale == 0 {
		return ""
	}
	return fmt.Sprintf(" [noise scale %s per bin; the tail past the last bin of %s or more is cut]", num(round3(r.Scale)), count(r.Floor))
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func round3(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 3, 64), 64)
	return v
}

func count(f float64) string { return strconv.FormatFloat(math.Round(f), 'f', 0, 64) }

func pct(f float64) string {
	if f > 0 && f < 0.001 {
		return "<0.1%"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}
