package conf

import "fmt"

// Pool modes (limits.pool.mode).
const (
	// PoolSession gives each client session an upstream connection of its
	// own for its whole life: the default.
	PoolSession = "session"
	// PoolTransaction lends a session an upstream connection for each
	// transaction (or statement outside one) from a pool of at most
	// max_backends connections per server.
	PoolTransaction = "transaction"
	// DefaultPoolBackends is max_backends in transaction mode when unset.
	DefaultPoolBackends = 20
)

// Pool is limits.pool: how client sessions share upstream connections.
type Pool struct {
	// Mode is "session" (the default) or "transaction".
	Mode string `yaml:"mode"`
	// MaxBackends caps the upstream query connections per server (the
	// primary, each replica) in transaction mode.
	MaxBackends int `yaml:"max_backends"`
}

// String describes the pool for check-config and logs.
func (p Pool) String() string {
	if p.Transaction() {
		return fmt.Sprintf("%s/%d", p.Mode, p.MaxBackends)
	}
	return p.Mode
}

// Transaction reports whether sessions share backends per transaction.
func (p Pool) Transaction() bool { return p.Mode == PoolTransaction }

func (p *Pool) applyDefaults() {
	if p.Mode == "" {
		p.Mode = PoolSession
	}
	if p.Mode == PoolTransaction && p.MaxBackends == 0 {
		p.MaxBackends = DefaultPoolBackends
	}
}

func (p *Pool) validate(pr *problems, maxConnections int) {
	switch p.Mode {
	case PoolSession:
		if p.MaxBackends != 0 {
			pr.add("limits.pool.max_backends", "applies only with limits.pool.mode: transaction (in session mode each session has its own backend, up to limits.max_connections)")
		}
	case PoolTransaction:
		if p.MaxBackends < 1 || p.MaxBackends > maxConfigurableMaxConnection {
			pr.add("limits.pool.max_backends", "must lie in [1, %d], got %d", maxConfigurableMaxConnection, p.MaxBackends)
		} else if maxConnections >= 1 && p.MaxBackends > maxConnections {
			pr.add("limits.pool.max_backends", "%d exceeds limits.max_connections %d: a pool larger than the sessions that share it is never used", p.MaxBackends, maxConnections)
		}
	default:
		pr.add("limits.pool.mode", "must be %q or %q, got %q", PoolSession, PoolTransaction, p.Mode)
	}
}
