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
)

// Limits bound what one client, or many, can make the proxy and the
// upstream do, so that a slow or malicious client cannot exhaust either.
// A zero duration in the file means "the default"; a negative one disables
// that timeout (not allowed for auth_timeout and statement_timeout).
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
	// rewritten private query, whatever the client SET.
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	// MaxConcurrentPrivate caps rewritten private queries running upstream
	// at once over all sessions; further ones wait for a slot.
	MaxConcurrentPrivate int `yaml:"max_concurrent_private_queries"`
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
	if l.MaxMessageSize >= 1 && l.MaxQueryLength > l.MaxMessageSize {
		p.add("limits.max_query_length", "%d exceeds limits.max_message_size %d", l.MaxQueryLength, l.MaxMessageSize)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"auth_timeout", l.AuthTimeout}, {"statement_timeout", l.StatementTimeout}} {
		if d.v < 0 {
			p.add("limits."+d.key, "must be a positive duration such as 30s, got %v", d.v)
		}
	}
	// PostgreSQL keeps statement_timeout in milliseconds as an int.
	if l.StatementTimeout > 0 && (l.StatementTimeout < time.Millisecond || l.StatementTimeout.Milliseconds() > 1<<31-1) {
		p.add("limits.statement_timeout", "must lie in [1ms, %v], got %v", time.Duration(1<<31-1)*time.Millisecond, l.StatementTimeout)
	}
}

// String describes the limits for check-config and logs.
func (l Limits) String() string {
	return fmt.Sprintf("max_connections=%d max_message_size=%d max_query_length=%d auth_timeout=%v idle_timeout=%v write_timeout=%v statement_timeout=%v max_concurrent_private_queries=%d",
		l.MaxConnections, l.MaxMessageSize, l.MaxQueryLength, l.AuthTimeout, l.IdleTimeout, l.WriteTimeout, l.StatementTimeout, l.MaxConcurrentPrivate)
}
