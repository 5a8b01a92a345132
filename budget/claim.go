package budget

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Claim is the exclusive right to release the answer to one question (one
// CacheKey) across every connection and proxy process sharing the ledger.
// While a Claim is held, anyone else claiming the same question waits; when
// it is released they find the stored answer and reuse it for free. So two
// connections asking the same new question at once never release two
// different noisy answers, and the question is charged once.
//
// The exclusion is a PostgreSQL session-level advisory lock on a ledger
// connection the Claim holds: if the process dies (kill -9), PostgreSQL
// ends its session and releases the lock, so a crash cannot leave a
// question locked. A Claim is used by one goroutine; callers must call
// Release, on every path.
//
// Use: Claim; if Cached, send that answer; otherwise Charge (durable before
// the query runs), run and noise the query, Store the answer, Release, and
// only then send it.
type Claim struct {
	l        *Ledger
	conn     *pgxpool.Conn // holds the lock; nil after Release
	analyst  string
	key      string // hex SHA-256 of the CacheKey
	lock     int64
	answer   []byte // the stored answer, if any
	chargeID int64  // set by Charge

	after afterCharge // set by Charge (fits.go)
}

// Claim waits until no one else holds key's question, then returns the
// claim with the stored answer if there is one. It returns
// *UnavailableError when the ledger cannot be reached or ctx ends while
// waiting.
func (l *Ledger) Claim(ctx context.Context, key CacheKey) (*Claim, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	id := key.Hash()
	c := &Claim{l: l, conn: conn, analyst: key.Analyst, key: id, lock: lockKey(id)}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, c.lock); err != nil {
		// Whether the lock was taken is unknown (a cancel may race the
		// grant): end the session, which releases it either way.
		c.discard()
		return nil, unavailable(err)
	}
	err = conn.QueryRow(ctx, `SELECT answer FROM dpproxy.answers WHERE analyst = $1 AND key = $2`,
		key.Analyst, id).Scan(&c.answer)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		c.Release()
		return nil, unavailable(err)
	}
	return c, nil
}

// Cached returns the answer stored for the claimed question, if any. It
// was paid for when it was first released: sending it again costs nothing.
func (c *Claim) Cached() ([]byte, bool) { return c.answer, c.answer != nil }

// Charge records the cost of answering the claimed question, as
// Ledger.Charge does, before the query runs. It is kept even if the answer
// is never stored (a failure must not be a side channel).
func (c *Claim) Charge(ctx context.Context, ch Charge) (Spend, error) {
	switch {
	case c.conn == nil:
		return Spend{}, errors.New("budget: charge on a released claim")
	case c.answer != nil:
		return Spend{}, errors.New("budget: charge for a question already answered")
	case c.chargeID != 0:
		return Spend{}, errors.New("budget: claim charged twice")
	case ch.Analyst != c.analyst:
		return Spend{}, errors.New("budget: charge for another analyst than the claim's")
	}
	s, id, err := c.l.charge(ctx, c.conn, ch, &c.after)
	if err != nil {
		return Spend{}, err
	}
	c.chargeID = id
	return s, nil
}

// Fits is how many more queries like the one the claim charged fit the
// budgets it was charged to, counted by the accountant from the totals
// the charge wrote (fits.go; no I/O); zero before Charge.
func (c *Claim) Fits() FitCount { return c.after.fits() }

// Store saves the released answer, paid for by the claim's charge. The
// caller must not send the answer unless Store succeeds: an answer that is
// not stored could be drawn afresh after a restart. It returns
// *UnavailableError when the ledger cannot be written.
func (c *Claim) Store(ctx context.Context, answer []byte) error {
	switch {
	case c.conn == nil:
		return errors.New("budget: store on a released claim")
	case c.chargeID == 0:
		return errors.New("budget: store of an answer that was not charged")
	case answer == nil:
		answer = []byte{}
	}
	err := pgx.BeginTxFunc(ctx, c.conn, txOptions(), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO dpproxy.answers (analyst, key, answer, charge_id) VALUES ($1, $2, $3, $4)`,
			c.analyst, c.key, answer, c.chargeID)
		return err
	})
	if err != nil {
		return unavailable(err)
	}
	c.answer = answer
	return nil
}

// Release gives the question up to the next claimant. It is safe to call
// more than once.
func (c *Claim) Release() {
	if c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var unlocked bool
	if err := c.conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, c.lock).Scan(&unlocked); err != nil || !unlocked {
		c.discard()
		return
	}
	c.conn.Release()
	c.conn = nil
}

// discard closes the claim's connection instead of returning it to the
// pool, which ends the session and so releases its advisory locks.
func (c *Claim) discard() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Conn().Close(ctx)
	c.conn.Release() // the pool drops a closed connection
	c.conn = nil
}

// lockKey maps a question's hash to an advisory lock key. Two questions
// sharing a key only wait for each other.
func lockKey(hexKey string) int64 {
	b, err := hex.DecodeString(hexKey[:16])
	if err != nil {
		panic("budget: lock key of a non-hex hash")
	}
	return int64(binary.BigEndian.Uint64(b))
}

// sum256 is a helper so that Hash reads clearly.
func sum256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
