package conf

import (
	"strconv"
	"time"
)

// Defaults of the replica keys.
const (
	DefaultReplicaMaxLag        = 10 * time.Second
	DefaultReplicaCheckInterval = time.Second
)

// Replicas are hot standbys of the upstream (streaming replication) that
// take the analysts' sessions, private and pass-through statements alike,
// while the ledger keeps writing to the primary through ledger_upstream.
// They are top-level keys of the file, beside upstream.
type Replicas struct {
	// DSNs are the replicas' URLs, with the query role's credentials
	// (the same role and database as upstream: roles replicate).
	DSNs []Secret `yaml:"replicas"`
	// MaxLag is the replay lag beyond which a replica takes no new
	// session: measured by the health check as the time since the last
	// transaction it replayed, when it has not replayed all the WAL the
	// primary had written when the check began.
	MaxLag time.Duration `yaml:"replica_max_lag"`
	// CheckInterval is how often each replica is checked (reachable, in
	// recovery, lag).
	CheckInterval time.Duration `yaml:"replica_check_interval"`
}

func (r *Replicas) applyDefaults() {
	if r.MaxLag == 0 {
		r.MaxLag = DefaultReplicaMaxLag
	}
	if r.CheckInterval == 0 {
		r.CheckInterval = DefaultReplicaCheckInterval
	}
}

func (r *Replicas) validate(p *problems, c *Config) {
	seen := map[Secret]bool{}
	for i, dsn := range r.DSNs {
		key := "replicas[" + strconv.Itoa(i) + "]"
		switch {
		case dsn == "":
			p.add(key, "empty: give a postgres:// URL of a hot standby")
		case seen[dsn]:
			p.add(key, "listed twice")
		case dsn == c.Upstream:
			p.add(key, "is upstream itself: list the standbys only (upstream takes sessions when no replica is healthy)")
		case dsn == c.LedgerUpstream:
			p.add(key, "is ledger_upstream: a replica connects as the query role")
		}
		seen[dsn] = true
	}
	if r.MaxLag < time.Millisecond {
		p.add("replica_max_lag", "must be at least 1ms, got %v", r.MaxLag)
	}
	if r.CheckInterval < 10*time.Millisecond || r.CheckInterval > time.Minute {
		p.add("replica_check_interval", "must lie between 10ms and 1m, got %v", r.CheckInterval)
	}
}
