package conf

// BoundsAuto is the value of a column's bounds key that asks for
// clamping bounds chosen at query time with DP (privacy.auto_bounds_share
// of each query's ε), instead of configured lower and upper.
const BoundsAuto = "auto"

// DefaultAutoBoundsShare is privacy.auto_bounds_share: the part of a
// query's ε spent on choosing the bounds of its bounds: auto column.
const DefaultAutoBoundsShare = 0.1

// AutoBounds reports whether the column's clamping bounds are chosen at
// query time (bounds: auto).
func (c *Column) AutoBounds() bool { return c != nil && c.Bounds == BoundsAuto }

// validateAutoBounds checks a column's bounds key: only "auto", and not
// together with lower or upper (which would leave two answers to what
// the bounds are).
func validateAutoBounds(p *problems, key string, col *Column) {
	if col.AutoBoundsShare != nil {
		if col.Bounds != BoundsAuto {
			p.add(key+".auto_bounds_share", "only a column with bounds: auto takes a share of ε for its bounds")
		} else if s := *col.AutoBoundsShare; !(s > 0 && s < 1) {
			p.add(key+".auto_bounds_share", "must lie strictly between 0 and 1, got %v", s)
		}
	}
	switch col.Bounds {
	case "":
		return
	case BoundsAuto:
	default:
		p.add(key+".bounds", "%q is not a valid value: the only one is auto (or give lower and upper instead)", col.Bounds)
		return
	}
	if col.Lower != nil || col.Upper != nil {
		p.add(key+".bounds", "auto and lower/upper exclude each other: give one or the other")
	}
}

// AutoBoundsShareOf is the share of a query's ε that buys the bounds of
// column col (bounds: auto): its own auto_bounds_share, or
// privacy.auto_bounds_share.
func (c *Config) AutoBoundsShareOf(col *Column) float64 {
	if col != nil && col.AutoBoundsShare != nil {
		return *col.AutoBoundsShare
	}
	return c.Privacy.AutoBoundsShare
}

// validateAutoBoundsShare checks privacy.auto_bounds_share: a part of
// the query's ε, strictly between 0 and 1, so that both the bounds and
// the answer get some of it.
func validateAutoBoundsShare(p *problems, share float64) {
	if !(share > 0 && share < 1) {
		p.add("privacy.auto_bounds_share", "must lie strictly between 0 and 1, got %v", share)
	}
}
