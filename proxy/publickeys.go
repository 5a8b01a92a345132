package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Group keys from public tables (rewrite/publickeys.go): a key that is a
// column of a joined public table is released with every value of that
// column, without partition selection. The values are read here, before
// the cache and the charge, with the rewrite's own statement (KeysSQL: one
// public table, at most MaxPublicTableKeys+1 rows), so that nothing about
// the read depends on a private row. They are read again for every fresh
// question: a value added to the public table is a key of the next
// question, and the answer cache's key holds a digest of the values, so a
// repeat after a change is a new question.

// withPublicKeys returns plan (a copy when it changes) with the values of
// every key from a public table filled in, and the digest of every key's
// public values (publicValuesDigest) for the answer cache's key. Above rewrite.MaxPublicTableKeys values for
// one key, or key combinations for the query, the copy goes through
// partition selection instead, as it would without the public table.
// A UNION ALL is filled branch by branch.
func (ss *session) withPublicKeys(ctx context.Context, plan *rewrite.Plan) (*rewrite.Plan, string, error) {
	if len(plan.Branches) > 0 {
		var branches []*rewrite.Plan
		digest, digested := "", false
		for i, b := range plan.Branches {
			nb, d, err := ss.withPublicKeys(ctx, b)
			if err != nil {
				return nil, "", err
			}
			if nb != b && branches == nil {
				branches = append([]*rewrite.Plan(nil), plan.Branches...)
			}
			if branches != nil {
				branches[i] = nb
			}
			digest += d + "|"
			digested = digested || d != ""
		}
		if !digested {
			digest = ""
		}
		if branches == nil {
			return plan, digest, nil
		}
		np := *plan
		np.Branches = branches
		return &np, digest, nil
	}
	if plan.PartitionSelection {
		return plan, publicValuesDigest(plan), nil // another key needs selection anyway
	}
	need := false
	for _, k := range plan.GroupKeys {
		need = need || k.PublicTable != ""
	}
	if !need {
		return plan, publicValuesDigest(plan), nil
	}
	np := *plan
	np.GroupKeys = append([]rewrite.GroupKey(nil), plan.GroupKeys...)
	combos, over := 1, false
	for i := range np.GroupKeys {
		k := &np.GroupKeys[i]
		if k.PublicTable != "" {
			vals, err := ss.readPublicKeys(ctx, k)
			if err != nil {
				return nil, "", err
			}
			if len(vals) > rewrite.MaxPublicTableKeys {
				over = true
				break
			}
			k.PublicValues = vals
		}
		combos *= len(k.PublicValues)
		if combos > rewrite.MaxPublicTableKeys {
			over = true
			break
		}
	}
	if over {
		for i := range np.GroupKeys {
			if k := &np.GroupKeys[i]; k.PublicTable != "" {
				k.PublicTable, k.KeysSQL, k.PublicValues = "", "", nil
			}
		}
		np.PartitionSelection = true
		return &np, "public-keys:selection", nil
	}
	return &np, publicValuesDigest(&np), nil
}

// publicValuesDigest is the answer cache's word on the keys' public
// values, those of public_values lists too (which a restart with another
// configuration, or another content of the table they are read from, may
// change): "" when no key has any.
func publicValuesDigest(plan *rewrite.Plan) string {
	h := sha256.New()
	has := false
	for _, k := range plan.GroupKeys {
		has = has || k.PublicValues != nil
		for _, v := range k.PublicValues {
			h.Write([]byte(strconv.Itoa(len(v)) + ":" + v))
		}
		h.Write([]byte{0})
	}
	if !has {
		return ""
	}
	return "public-keys:" + hex.EncodeToString(h.Sum(nil))
}

// readPublicKeys runs k.KeysSQL: the distinct non-NULL values of a public
// table's column as text, at most MaxPublicTableKeys+1 of them.
func (ss *session) readPublicKeys(ctx context.Context, k *rewrite.GroupKey) ([]string, error) {
	done := upstreamTimer(ctx)
	limit := []byte(strconv.Itoa(rewrite.MaxPublicTableKeys + 1))
	rr := ss.upstream.Conn().PgConn().ExecParams(ctx, k.KeysSQL, [][]byte{limit}, []uint32{oidInt8}, []int16{0}, []int16{0})
	rows := collectRows(rr)
	_, err := rr.Close()
	done()
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			// About a public table only, which the analyst may read.
			return nil, &Error{Code: pgerr.Code(pgErr.Code), Refusal: true, Cause: err,
				Message: "reading the group keys of public table " + k.PublicTable + ": " + pgErr.Message,
				Hint:    "dpproxy reads every value of a public table's group key before it reads any private row; nothing was charged"}
		}
		return nil, err
	}
	vals := make([]string, 0, len(rows))
	for _, r := range rows {
		if len(r) != 1 || r[0] == nil {
			return nil, fail(pgerr.InternalError, "the group keys of public table %s came back malformed", k.PublicTable)
		}
		vals = append(vals, string(r[0]))
	}
	return vals, nil
}
