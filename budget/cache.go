package budget

import (
	"fmt"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"
)

// CacheKey identifies one noisy answer: the same normalized query by the
// same analyst with the same privacy parameters gets the same answer, so
// that repeating a query neither costs budget nor averages the noise away.
type CacheKey struct {
	Analyst string
	// Query is the normalized query (pg_query Normalize or Fingerprint
	// together with its bound parameters), never raw SQL kept for display.
	Query          string
	Epsilon, Delta float64
	Mechanism      string
	// Params holds anything else that changes the answer's distribution
	// (bounds, contribution limits, the budget split), encoded by the
	// caller.
	Params string
	// Settings are the session's values of the settings that change how
	// PostgreSQL renders the answer's values (TimeZone, DateStyle, ...):
	// an answer whose group keys were rendered under one time zone is not
	// the answer under another.
	Settings string
}

// Hash is the hex SHA-256 of every field of k, the key of k's answer in
// dpproxy.answers. Fields are length-prefixed, so no two keys share an
// encoding; ε and δ are encoded as their shortest round-trip decimals.
func (k CacheKey) Hash() string {
	var b []byte
	for _, f := range []string{"dpproxy-answer-v1", k.Analyst, k.Query, decimal(k.Epsilon), decimal(k.Delta), k.Mechanism, k.Params, k.Settings} {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
	}
	return sum256(b)
}

// Cache is a bounded LRU cache of noisy answers in front of the ledger's
// durable dpproxy.answers (see Claim). It is safe for concurrent use.
// Callers add an answer only after the ledger stored it, so the memory
// cache never holds an answer the ledger does not.
type Cache[V any] struct {
	lru *lru.Cache[CacheKey, V] // does its own locking
}

// NewCache returns a cache holding at most size answers; size must be > 0.
func NewCache[V any](size int) (*Cache[V], error) {
	c, err := lru.New[CacheKey, V](size)
	if err != nil {
		return nil, fmt.Errorf("budget: cache of size %d: %w", size, err)
	}
	return &Cache[V]{lru: c}, nil
}

// Get returns the cached answer for k and marks it recently used.
func (c *Cache[V]) Get(k CacheKey) (V, bool) { return c.lru.Get(k) }

// Add caches v for k, evicting the least recently used answer when full.
// Callers add an answer only after Claim.Store (or Claim.Cached) has it.
func (c *Cache[V]) Add(k CacheKey, v V) { c.lru.Add(k, v) }

// Len is the number of cached answers.
func (c *Cache[V]) Len() int { return c.lru.Len() }
