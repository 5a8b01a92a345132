package e2e

import "github.com/jackc/pgx/v5/pgtype"

type (
	pgtypeNumeric = pgtype.Numeric
	pgtypeFloat8  = pgtype.Float8
)
