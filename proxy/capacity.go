package proxy

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dpproxy/dpproxy/conf"
)

// The upstream's connection capacity against the proxy's: New's start-up
// check (checkLimits) and check-config's (check.go) of
// limits.max_connections and the ledger's pool against the server's
// max_connections.

// capacitySQL reads how many connections the upstream server gives roles
// that are not superusers: max_connections less the slots reserved for
// superusers and (PostgreSQL 16) for pg_use_reserved_connections.
const capacitySQL = `SELECT pg_catalog.current_setting('max_connections')::int,
	pg_catalog.current_setting('superuser_reserved_connections')::int,
	coalesce(pg_catalog.current_setting('reserved_connections', true), '0')::int`

// capacity is the upstream's connection capacity (capacitySQL).
type capacity struct{ max, superuser, reserved int }

func (c capacity) available() int { return c.max - c.superuser - c.reserved }

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readCapacity(ctx context.Context, q rowQuerier) (capacity, error) {
	var c capacity
	err := q.QueryRow(ctx, capacitySQL).Scan(&c.max, &c.superuser, &c.reserved)
	return c, err
}

// fitConnections returns how many client sessions the proxy can serve on
// the upstream's capacity c, each holding one upstream connection, next to
// the ledger's pool: limits.max_connections or fewer. fits is false when
// limits.max_connections had to be lowered; fit < 1 when the ledger alone
// takes every connection.
func fitConnections(l conf.Limits, c capacity) (fit int, fits bool) {
	l = l.WithDefaults()
	room := c.available() - ledgerPoolSize(l)
	return min(l.MaxConnections, room), l.MaxConnections <= room
}

// poolFits reports whether limits.pool.max_backends connections fit next
// to the ledger's pool in transaction mode, where sessions share them
// (pool.go) and limits.max_connections counts only client sessions.
func poolFits(l conf.Limits, c capacity) (room int, fits bool) {
	l = l.WithDefaults()
	room = c.available() - ledgerPoolSize(l)
	return room, l.Pool.MaxBackends <= room
}

// capacityReport describes the fit for the log and check-config.
func capacityReport(l conf.Limits, c capacity) string {
	l = l.WithDefaults()
	return fmt.Sprintf("the upstream accepts %d connections from roles that are not superusers (max_connections %d, %d reserved for superusers, %d reserved_connections); the proxy opens at most %d for analysts (limits.max_connections) and %d for the ledger",
		c.available(), c.max, c.superuser, c.reserved, l.MaxConnections, ledgerPoolSize(l))
}

// checkLimits is New's start-up check of the limits against the upstream
// and the process: the analysts' sessions and the ledger's pool must fit
// in the upstream's max_connections (each session holds one upstream
// connection for its life), else limits.max_connections is lowered to what
// fits, with a warning, or the proxy refuses to start when nothing does;
// and a stack too small for limits.max_query_depth lowers the depth the
// guard lets through (rewrite/guard.go), with a warning. Other clients of
// the same server (another proxy, applications) are not counted.
func (s *Server) checkLimits(ctx context.Context) error {
	c, err := readCapacity(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("proxy: reading the upstream's max_connections: %w", err)
	}
	if s.lim.cfg.Pool.Transaction() {
		if room, fits := poolFits(s.lim.cfg, c); !fits {
			return fmt.Errorf("proxy: limits.pool.max_backends %d exceeds the %d connections the upstream can give next to the ledger's pool: lower it or raise max_connections on the server", s.lim.cfg.Pool.MaxBackends, room)
		}
	} else if err := s.fitSessions(c); err != nil {
		return err
	}
	if d := s.analyzer.MaxQueryDepth(); d < s.lim.cfg.MaxQueryDepth {
		s.log.Warn("limits.max_query_depth lowered to what the stack can take (ulimit -s; the default 8 MiB allows the default depth)",
			"max_query_depth", d, "configured", s.lim.cfg.MaxQueryDepth)
	}
	return nil
}

// fitSessions is checkLimits's part in session mode: each session holds
// one upstream connection, so limits.max_connections must fit.
func (s *Server) fitSessions(c capacity) error {
	fit, fits := fitConnections(s.lim.cfg, c)
	if fit < 1 {
		return fmt.Errorf("proxy: upstream: no connection left for analysts: %s; raise max_connections on the server or lower limits.max_concurrent_private_queries", capacityReport(s.lim.cfg, c))
	}
	if !fits {
		s.log.Warn("limits.max_connections lowered to what the upstream can give: "+capacityReport(s.lim.cfg, c), "max_connections", fit)
		s.lim.maxConns = fit
	}
	return nil
}
