package bounds

import (
	"math"
	"sort"
)

// Noise95 is the 95% bound of the noise the proxy adds to one aggregate
// with sensitivity (l0, lInf) at the configured default ε (and δ, for
// Gaussian noise): noise.Mechanism.ErrorBound.
type Noise95 func(l0 int64, lInf float64) (float64, error)

// Row is one candidate bound with its trade-off: the share of rows,
// pairs or of the sum that bounding drops, and what that share is in the
// group a candidate is priced on (Dropped), next to the 95% noise of the
// aggregate over that group.
type Row struct {
	Bound        float64
	Lower        float64 // clamping proposals only
	DroppedShare float64
	Dropped      float64
	Noise        float64
}

// Cost is what the proposal minimizes: the bias plus the 95% noise bound
// of the aggregate the table is priced on.
func (r Row) Cost() float64 { return r.Dropped + r.Noise }

// RowCandidates are the max_rows_per_unit values offered: the count bins'
// edges up to the largest non-empty bin, and the current bound.
func RowCandidates(h Hist, current int64) []float64 {
	last := 0
	for i, c := range h.Count {
		if c > 0 {
			last = i
		}
	}
	var out []float64
	for i := 0; i <= last+1 && i < len(h.Bins.Lo); i++ {
		out = append(out, h.Bins.Lo[i])
	}
	if current > 0 {
		out = append(out, float64(current))
	}
	return uniq(out)
}

// RowsTradeoff prices each max_rows_per_unit candidate R on a COUNT(*)
// over a share g of the table's rows (1: the whole table): the rows
// beyond R per unit, as a share, times g·rows, against the noise of a
// count of sensitivity R.
func RowsTradeoff(h Hist, cands []float64, g float64, noise Noise95) ([]Row, error) {
	total := h.Total()
	var out []Row
	for _, r := range cands {
		n, err := noise(1, r)
		if err != nil {
			return nil, err
		}
		sh := share(h.Excess(r), total)
		out = append(out, Row{Bound: r, Dropped: sh * g * total, DroppedShare: sh, Noise: n})
	}
	return out, nil
}

// GroupsTradeoff prices each max_groups_per_unit candidate G (1 to the
// number of public values, or the bins' edges for a column without) on
// one group's COUNT(*) of a GROUP BY the column, the group holding
// groupRows rows: the (unit, group) pairs beyond G per unit, as a share,
// times groupRows, against the noise at sensitivity (G, rows).
func GroupsTradeoff(h Hist, cands []float64, rows float64, groupRows float64, noise Noise95) ([]Row, error) {
	pairs := h.Total()
	var out []Row
	for _, g := range cands {
		n, err := noise(int64(g), rows)
		if err != nil {
			return nil, err
		}
		s := share(h.Excess(g), pairs)
		out = append(out, Row{Bound: g, DroppedShare: s, Dropped: s * groupRows, Noise: n})
	}
	return out, nil
}

// GroupCandidates are 1 to k for k public values, else the bins' edges up
// to one past the largest non-empty bin, and the current bound.
func GroupCandidates(h Hist, k int, current int64) []float64 {
	if k > 0 {
		out := make([]float64, k)
		for i := range out {
			out[i] = float64(i + 1)
		}
		return out
	}
	return RowCandidates(h, current)
}

// ClampTradeoff prices clamping bounds [L, U] on a SUM over a share g of
// the rows: the change clamping makes to the sum, as a share of the sum
// of absolute values, times g, against the noise of a sum of sensitivity
// rows·max(|L|, |U|). U runs over 0 and the bins' edges up
// to one past the largest non-empty positive bin, L over 0 and minus
// the edges likewise on the negative side. It returns, for each U, the
// row of the best L, and the best row overall.
func ClampTradeoff(s Signed, rows, g float64, noise Noise95) ([]Row, Row, error) {
	ups := edgesUpTo(s.Pos)
	downs := edgesUpTo(s.Neg)
	abs := s.AbsTotal()
	var out []Row
	best := Row{Noise: math.Inf(1)}
	for _, u := range ups {
		rowU := Row{Noise: math.Inf(1)}
		for _, d := range downs {
			lo := 0 - d // never -0
			var n float64
			if sens := rows * math.Max(math.Abs(lo), math.Abs(u)); sens > 0 {
				var err error
				if n, err = noise(1, sens); err != nil {
					return nil, Row{}, err
				}
			}
			sh := share(s.Clamped(lo, u), abs)
			r := Row{Bound: u, Lower: lo, Dropped: sh * g * abs, DroppedShare: sh, Noise: n}
			if r.Cost() < rowU.Cost() {
				rowU = r
			}
		}
		out = append(out, rowU)
		if rowU.Cost() < best.Cost() {
			best = rowU
		}
	}
	return out, best, nil
}

// edgesUpTo is 0 and the edges of h's bins up to the upper edge of its
// largest non-empty bin.
func edgesUpTo(h Hist) []float64 {
	out := []float64{0}
	last := -1
	for i, c := range h.Count {
		if c > 0 {
			last = i
		}
	}
	for i := 1; i <= last+1 && i < len(h.Bins.Lo); i++ {
		out = append(out, h.Bins.Lo[i])
	}
	return uniq(out)
}

// Best is the row of least Cost (the smallest bound among equals).
func Best(rows []Row) Row {
	b := rows[0]
	for _, r := range rows[1:] {
		if r.Cost() < b.Cost() {
			b = r
		}
	}
	return b
}

// Shown picks at most n rows to print, always keeping the ones whose
// bounds are in keep: a trade-off table stays readable.
func Shown(rows []Row, n int, keep ...float64) []Row {
	if len(rows) <= n {
		return rows
	}
	want := map[float64]bool{}
	for _, k := range keep {
		want[k] = true
	}
	step := float64(len(rows)-1) / float64(n-1)
	for i := 0; i < n; i++ {
		want[rows[int(math.Round(float64(i)*step))].Bound] = true
	}
	var out []Row
	for _, r := range rows {
		if want[r.Bound] {
			out = append(out, r)
		}
	}
	return out
}

func share(part, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return math.Min(1, part/total)
}

func uniq(xs []float64) []float64 {
	sort.Float64s(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
