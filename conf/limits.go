package conf

import (
	"fmt"
	"time"
)

// Defaults of the limits section.
const (
	DefaultMaxConnections        = 500
	DefaultMaxMessageSize        = 8 << 20
	DefaultMaxQueryLength        = 1 << 20
	DefaultAuthTimeout           = 30 * time.Second
	DefaultIdleTimeout           = time.Hour
	DefaultWriteTimeout          = time.Minute
	DefaultStatementTimeout      = time.Minute
	DefaultMaxConcurrentPrivate  = 16
	maxConfigurableMessageSize   = 1 << 30
	maxConfigurableQueryLength   = 1 << 30
	maxConfigurableMaxConnection = 1 << 20

	DefaultMaxConnectionsPerAnalyst       = 50
	DefaultMaxConcurrentPrivatePerAnalyst = 4
	DefaultPrivateQueryWait               = 30 * time.Second
	// DefaultMaxQueryDepth and MaxQueryDepthCeiling bound the guard
	// before the parser (rewrite/guard.go): measured, the analysis of
	// one unit of depth takes about 2 KiB of the C stack pg_query runs
	// on, so 2000 units stay within half of the default 8 MiB, and the
	// default within an eighth (see docs/threat-model.md, "Limits").
	DefaultMaxQueryDepth  = 500
	MaxQueryDepthCeiling  = 2000
	minQueryDepth         = 32
	DefaultMaxQueryTokens = 50_000
	maxConfigurableTokens = 1 << 20
)

// Limits bound what one client, or many, can make the proxy and the
// upstream do, so that a slow or malicious client cannot exhaust either.
// A key absent from the file takes its default (a zero given explicitly is
// an error, see explicitZeros); a negative duration disables
// that timeout (not allowed for auth_timeout, statement_timeout and
// private_query_wait).
type Limits struct {
	// MaxConnections caps client connections, authenticated or not; the
	// next one gets FATAL 53300. It also caps the upstream query pool.
	MaxConnections int `yaml:"max_connections"`
	// MaxMessageSize caps one wire message from a client, in bytes.
	MaxMessageSize int `yaml:"max_message_size"`
	// MaxQueryLength caps the SQL text of one Query or Parse, in bytes.
	MaxQueryLength int `yaml:"max_query_length"`
	// AuthTimeout bounds the time from connecting to being authenticated.
	AuthTimeout time.Duration `yaml:"auth_timeout"`
	// IdleTimeout closes a session that sends nothing for that long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// WriteTimeout closes a session whose client does not read its
	// results for that long (it would hold an upstream connection).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// StatementTimeout is the upstream statement_timeout of every
	// statement, pass-through ones included: the upstream connections
	// start with it, a client may only SET a shorter one (never 0), and
	// every rewritten private query runs with exactly this value.
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	// MaxConcurrentPrivate caps private queries in progress at once over
	// all sessions; further ones wait for a slot (PrivateQueryWait).
	MaxConcurrentPrivate int `yaml:"max_concurrent_private_queries"`
	// MaxConnectionsPerAnalyst caps one analyst's sessions; the next one
	// gets FATAL 53300, so that one analyst cannot take every upstream
	// connection.
	MaxConnectionsPerAnalyst int `yaml:"max_connections_per_analyst"`
	// MaxConcurrentPrivatePerAnalyst caps one analyst's private queries
	// in progress at once, so that one analyst cannot hold every slot of
	// MaxConcurrentPrivate.
	MaxConcurrentPrivatePerAnalyst int `yaml:"max_concurrent_private_queries_per_analyst"`
	// PrivateQueryWait bounds the wait for a private-query slot (the
	// analyst's, then the server's); past it the query is refused with
	// 57014, before anything is charged.
	PrivateQueryWait time.Duration `yaml:"private_query_wait"`
	// MaxQueryDepth bounds the nesting of one query text (parentheses,
	// CASE, chains of operators, joins and set operations), estimated by
	// a scan before the parser: deeper texts would overflow the C stack
	// pg_query runs on and kill the process.
	MaxQueryDepth int `yaml:"max_query_depth"`
	// MaxQueryTokens bounds the lexical tokens of one query text, which
	// the analysis's time and memory grow with.
	MaxQueryTokens int `yaml:"max_query_tokens"`
	// Pool shares upstream connections between sessions (pool.go).
	Pool Pool `yaml:"pool"`
}

// WithDefaults returns l with every unset (zero) field at its default, for
// configurations built in code rather than by Load.
func (l Limits) WithDefaults() Limits {
	l.applyDefaults()
	return l
}

func (l *Limits) applyDefaults() {
	if l.MaxConnections == 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.MaxMessageSize == 0 {
		l.MaxMessageSize = DefaultMaxMessageSize
	}
	if l.MaxQueryLength == 0 {
		l.MaxQueryLength = DefaultMaxQueryLength
		if l.MaxMessageSize > 0 {
			l.MaxQueryLength = min(l.MaxQueryLength, l.MaxMessageSize)
		}
	}
	if l.AuthTimeout == 0 {
		l.AuthTimeout = DefaultAuthTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.StatementTimeout == 0 {
		l.StatementTimeout = DefaultStatementTimeout
	}
	if l.MaxConcurrentPrivate == 0 {
		l.MaxConcurrentPrivate = DefaultMaxConcurrentPrivate
	}
	if l.MaxConnectionsPerAnalyst == 0 {
		l.MaxConnectionsPerAnalyst = DefaultMaxConnectionsPerAnalyst
	}
	if l.MaxConcurrentPrivatePerAnalyst == 0 {
		l.MaxConcurrentPrivatePerAnalyst = DefaultMaxConcurrentPrivatePerAnalyst
	}
	if l.PrivateQueryWait == 0 {
		l.PrivateQueryWait = DefaultPrivateQueryWait
	}
	if l.MaxQueryDepth == 0 {
		l.MaxQueryDepth = DefaultMaxQueryDepth
	}
	if l.MaxQueryTokens == 0 {
		l.MaxQueryTokens = DefaultMaxQueryTokens
	}
	l.Pool.applyDefaults()
}

func (l *Limits) validate(p *problems) {
	positive := func(key string, v, max int) {
		if v < 1 || v > max {
			p.add("limits."+key, "must lie in [1, %d], got %d", max, v)
		}
	}
	positive("max_connections", l.MaxConnections, maxConfigurableMaxConnection)
	positive("max_message_size", l.MaxMessageSize, maxConfigurableMessageSize)
	positive("max_query_length", l.MaxQueryLength, maxConfigurableQueryLength)
	positive("max_concurrent_private_queries", l.MaxConcurrentPrivate, maxConfigurableMaxConnection)
	positive("max_connections_per_analyst", l.MaxConnectionsPerAnalyst, maxConfigurableMaxConnection)
	positive("max_concurrent_private_queries_per_analyst", l.MaxConcurrentPrivatePerAnalyst, maxConfigurableMaxConnection)
	positive("max_query_tokens", l.MaxQueryTokens, maxConfigurableTokens)
	if l.MaxQueryDepth < minQueryDepth || l.MaxQueryDepth > MaxQueryDepthCeiling {
		// Above the ceiling a text could overflow pg_query's C stack.
		p.add("limits.max_query_depth", "must lie in [%d, %d], got %d", minQueryDepth, MaxQueryDepthCeiling, l.MaxQueryDepth)
	}
	if l.MaxMessageSize >= 1 && l.MaxQueryLength > l.MaxMessageSize {
		p.add("limits.max_query_length", "%d exceeds limits.max_message_size %d", l.MaxQueryLength, l.MaxMessageSize)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"auth_timeout", l.AuthTimeout}, {"statement_timeout", l.StatementTimeout}, {"private_query_wait", l.PrivateQueryWait}} {
		if d.v < 0 {
			p.add("limits."+d.key, "must be a positive duration such as 30s, got %v", d.v)
		}
	}
	l.Pool.validate(p, l.MaxConnections)
	// PostgreSQL keeps statement_timeout in milliseconds as an int.
	if l.StatementTimeout > 0 && (l.StatementTimeout < time.Millisecond || l.StatementTimeout.Milliseconds() > 1<<31-1) {
		p.add("limits.statement_timeout", "must lie in [1ms, %v], got %v", time.Duration(1<<31-1)*time.Millisecond, l.StatementTimeout)
	}
}

// String describes the limits for check-config and logs.
func (l Limits) String() string {
	return fmt.Sprintf("max_connections=%d max_connections_per_analyst=%d max_message_size=%d max_query_length=%d max_query_depth=%d max_query_tokens=%d auth_timeout=%v idle_timeout=%v write_timeout=%v statement_timeout=%v max_concurrent_private_queries=%d max_concurrent_private_queries_per_analyst=%d private_query_wait=%v pool=%s",
		l.MaxConnections, l.MaxConnectionsPerAnalyst, l.MaxMessageSize, l.MaxQueryLength, l.MaxQueryDepth, l.MaxQueryTokens, l.AuthTimeout, l.IdleTimeout, l.WriteTimeout,
		l.StatementTimeout, l.MaxConcurrentPrivate, l.MaxConcurrentPrivatePerAnalyst, l.PrivateQueryWait, l.Pool)
}
