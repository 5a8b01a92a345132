package budget

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Numeric is an exact decimal as PostgreSQL's numeric type holds it: an
// integer coefficient and a display scale (the digits after the point), so
// value = coef / 10^scale. The ledger reads the budgets row as numeric text
// into Numerics, the accountants add and compare them exactly, and the ledger
// writes the new totals back as text.
//
// Exactness is the point: ten charges of 0.1 must add up to exactly 1.0 and
// meet a limit of 1 (float64 gives 0.9999999999999999), and 1.0 − 0.7 must
// read 0.3. So the running sums never pass through float64; only what is
// shown (Spend) is converted, to the float64 nearest the exact value, as
// PostgreSQL's numeric::float8 does.
//
// A sum keeps the larger scale of its operands and parsing keeps the scale
// of the text (with an exponent: digits after the point minus the
// exponent, at least 0), exactly as PostgreSQL's numeric input and addition
// do (numeric.c: numeric_in, add_var), so a total computed here and written
// back reads as the same text PostgreSQL's own epsilon_spent + 0.1 would
// have stored: "1.0" after ten charges of 0.1, not "1".
//
// The zero value is 0. Numerics are immutable: every operation returns a
// new one, so they may be copied and shared freely.
type Numeric struct {
	coef  *big.Int // nil means 0
	scale int
}

// maxNumericExponent bounds the exponent ParseNumeric accepts, so that
// hostile text cannot make it allocate 10^huge. decimal() of a float64
// never exceeds ±324, and PostgreSQL's numeric::text has no exponent.
const maxNumericExponent = 1000

// ParseNumeric reads s: PostgreSQL's numeric output ("-12.50") or a
// decimal with an exponent ("1e-07", as decimal() writes). NaN and
// infinities are refused: no ledger total or limit can be one.
func ParseNumeric(s string) (Numeric, error) {
	bad := func() (Numeric, error) { return Numeric{}, fmt.Errorf("budget: not a finite decimal: %q", s) }
	mant, neg := s, false
	if mant != "" && (mant[0] == '-' || mant[0] == '+') {
		mant, neg = mant[1:], mant[0] == '-'
	}
	exp := 0
	if i := strings.IndexAny(mant, "eE"); i >= 0 {
		e, err := strconv.Atoi(mant[i+1:])
		if err != nil || e > maxNumericExponent || e < -maxNumericExponent {
			return bad()
		}
		mant, exp = mant[:i], e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return bad()
	}
	coef, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return bad()
	}
	scale := len(frac) - exp
	if scale < 0 {
		coef.Mul(coef, pow10(-scale))
		scale = 0
	}
	if neg {
		coef.Neg(coef)
	}
	return Numeric{coef: coef, scale: scale}, nil
}

// numericOf is the exact value of decimal(f), the text the ledger sends
// PostgreSQL for f. f must be finite (validate checks charges first).
func numericOf(f float64) Numeric {
	n, err := ParseNumeric(decimal(f))
	if err != nil {
		panic("budget: numericOf a non-finite float: " + decimal(f))
	}
	return n
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }

func (n Numeric) int() *big.Int {
	if n.coef == nil {
		return new(big.Int)
	}
	return n.coef
}

// at returns n's coefficient at the larger scale s >= n.scale.
func (n Numeric) at(s int) *big.Int {
	if s == n.scale {
		return n.int()
	}
	return new(big.Int).Mul(n.int(), pow10(s-n.scale))
}

// Add returns n + m, with the larger scale of the two.
func (n Numeric) Add(m Numeric) Numeric {
	s := max(n.scale, m.scale)
	return Numeric{coef: new(big.Int).Add(n.at(s), m.at(s)), scale: s}
}

// Sub returns n − m, with the larger scale of the two.
func (n Numeric) Sub(m Numeric) Numeric {
	s := max(n.scale, m.scale)
	return Numeric{coef: new(big.Int).Sub(n.at(s), m.at(s)), scale: s}
}

// Cmp compares n and m exactly: -1, 0 or +1.
func (n Numeric) Cmp(m Numeric) int {
	s := max(n.scale, m.scale)
	return n.at(s).Cmp(m.at(s))
}

// Rat is n as an exact fraction.
func (n Numeric) Rat() *big.Rat { return new(big.Rat).SetFrac(n.int(), pow10(n.scale)) }

// Float64 is the float64 nearest n (ties to even), the value PostgreSQL's
// numeric::float8 gives.
func (n Numeric) Float64() float64 {
	f, _ := n.Rat().Float64()
	return f
}

// String is n as PostgreSQL prints a numeric: all its scale's digits after
// the point, no exponent.
func (n Numeric) String() string {
	c := n.int()
	digits := new(big.Int).Abs(c).String()
	if n.scale > 0 {
		if len(digits) <= n.scale {
			digits = strings.Repeat("0", n.scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-n.scale] + "." + digits[len(digits)-n.scale:]
	}
	if c.Sign() < 0 {
		return "-" + digits
	}
	return digits
}

// Mul returns n × m exactly, with the sum of the scales, as PostgreSQL's
// numeric multiplication gives it (numeric.c: mul_var at full precision),
// so that Σε² computed here and by the ledger's migration agree.
func (n Numeric) Mul(m Numeric) Numeric {
	return Numeric{coef: new(big.Int).Mul(n.int(), m.int()), scale: n.scale + m.scale}
}
