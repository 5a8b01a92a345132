package conf

import (
	"strings"
	"testing"
	"time"
)

func TestLimitsDefaults(t *testing.T) {
	c, err := Parse("good.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{MaxConnections: 500, MaxMessageSize: 8 << 20, MaxQueryLength: 1 << 20, AuthTimeout: 30 * time.Second,
		IdleTimeout: time.Hour, WriteTimeout: time.Minute, StatementTimeout: time.Minute, MaxConcurrentPrivate: 16,
		MaxConnectionsPerAnalyst: 50, MaxConcurrentPrivatePerAnalyst: 4, PrivateQueryWait: 30 * time.Second,
		MaxQueryDepth: 500, MaxQueryTokens: 50_000, Pool: Pool{Mode: PoolSession}}
	if c.Limits != want {
		t.Errorf("default limits = %v, want %v", c.Limits, want)
	}
}

func TestLimitsParsed(t *testing.T) {
	y := good + `
limits:
  max_connections: 10
  max_message_size: 65536
  max_query_length: 4096
  auth_timeout: 5s
  idle_timeout: -1s
  write_timeout: 2m
  statement_timeout: 1500ms
  max_concurrent_private_queries: 3
  max_connections_per_analyst: 4
  max_concurrent_private_queries_per_analyst: 2
  private_query_wait: 5s
  max_query_depth: 200
  max_query_tokens: 5000
`
	c, err := Parse("l.yaml", []byte(y), env)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{MaxConnections: 10, MaxMessageSize: 65536, MaxQueryLength: 4096, AuthTimeout: 5 * time.Second,
		IdleTimeout: -time.Second, WriteTimeout: 2 * time.Minute, StatementTimeout: 1500 * time.Millisecond, MaxConcurrentPrivate: 3,
		MaxConnectionsPerAnalyst: 4, MaxConcurrentPrivatePerAnalyst: 2, PrivateQueryWait: 5 * time.Second,
		MaxQueryDepth: 200, MaxQueryTokens: 5000, Pool: Pool{Mode: PoolSession}}
	if c.Limits != want {
		t.Errorf("limits = %v, want %v", c.Limits, want)
	}
}

func TestLimitsRejected(t *testing.T) {
	cases := map[string]string{
		"max_connections: -1":                            "limits.max_connections",
		"max_message_size: 2147483647":                   "limits.max_message_size",
		"max_query_length: 9999999":                      "limits.max_query_length",
		"statement_timeout: -5s":                         "limits.statement_timeout",
		"auth_timeout: -1s":                              "limits.auth_timeout",
		"statement_timeout: 100us":                       "limits.statement_timeout",
		"max_concurrent_private_queries: -2":             "limits.max_concurrent_private_queries",
		"max_connections_per_analyst: -1":                "limits.max_connections_per_analyst",
		"max_concurrent_private_queries_per_analyst: -3": "limits.max_concurrent_private_queries_per_analyst",
		"private_query_wait: -1s":                        "limits.private_query_wait",
		"max_query_depth: 5000":                          "limits.max_query_depth",
		"max_query_depth: 3":                             "limits.max_query_depth",
		"max_query_tokens: -1":                           "limits.max_query_tokens",
		"max_query_tokens: 99999999":                     "limits.max_query_tokens",
		"idle_timeout: soon":                             "time.Duration",
		"max_conections: 3":                              "max_conections",
		"pool: {mode: statement}":                        "limits.pool.mode",
		"pool: {max_backends: 5}":                        "limits.pool.max_backends",
		"pool: {mode: transaction, max_backends: -1}":    "limits.pool.max_backends",
		"pool: {mode: transaction, max_backends: 501}":   "limits.pool.max_backends",
	}
	for line, key := range cases {
		_, err := Parse("l.yaml", []byte(good+"\nlimits:\n  "+line+"\n"), env)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("limits %q: err = %v, want one naming %s", line, err, key)
		}
	}
}

func TestPoolParsed(t *testing.T) {
	for y, want := range map[string]Pool{
		"  pool: {mode: transaction, max_backends: 3}": {Mode: PoolTransaction, MaxBackends: 3},
		"  pool: {mode: transaction}":                  {Mode: PoolTransaction, MaxBackends: DefaultPoolBackends},
		"  pool: {mode: session}":                      {Mode: PoolSession},
	} {
		c, err := Parse("l.yaml", []byte(good+"\nlimits:\n"+y+"\n"), env)
		if err != nil {
			t.Fatalf("%s: %v", y, err)
		}
		if c.Limits.Pool != want {
			t.Errorf("%s: pool = %+v, want %+v", y, c.Limits.Pool, want)
		}
		if c.Limits.Pool.Transaction() != (want.Mode == PoolTransaction) {
			t.Errorf("%s: Transaction() wrong", y)
		}
	}
}
