package proxy

import (
	"context"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dpproxy/dpproxy/rewrite"
)

// outputFields is the row description a client is given for a private
// plan at Parse/Describe (extended protocol). Without post-processing it
// is the original statement's (d.fields). With it, d describes the
// intermediate release (every key and aggregate, DescribeSQL), while the
// answer is the post-processing query's result: the original select
// list, with its names, types and number of columns. Describing the
// intermediate one gave clients the wrong names (n, mean became count,
// avg), types (an int8 description of a numeric expression, unreadable in
// binary) and, when a key was not an output, a column count the rows did
// not have (pgx panics on such a row); the semantic differential test
// found it. The original statement is analysed, not run: parse analysis
// reads no table (checkPost does the same before the charge).
func (ss *session) outputFields(ctx context.Context, plan *rewrite.Plan, d *description) ([]pgproto3.FieldDescription, error) {
	if plan.Post == nil {
		return d.fields, nil
	}
	defer upstreamTimer(ctx)()
	sd, err := ss.upstream.Conn().PgConn().Prepare(ctx, "", plan.OriginalSQL, d.paramOIDs)
	if err != nil {
		return nil, err
	}
	return rowDescription(sd.Fields).Fields, nil
}
