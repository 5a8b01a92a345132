package conf

import (
	"strconv"
	"time"
)

// Replicas (Config.Replicas) are hot standbys of the upstream (streaming
// replication) that take the analysts' sessions, private and pass-through
// statements alike, while the ledger keeps writing to the primary through
// ledger_upstream. Each is a URL with the query role's credentials, to the
// same database as upstream (roles and data replicate).
//
// ReplicaMaxLag is the replay lag beyond which a replica takes no new
// session: the time since the primary's WAL first went past the replica's
// replay position, as the health check measures it. ReplicaCheckInterval
// is how often each replica is checked (reachable, in recovery, lag).

// Defaults of the replica keys.
const (
	DefaultReplicaMaxLag        = 10 * time.Second
	DefaultReplicaCheckInterval = time.Second
)

func (c *Config) applyReplicaDefaults() {
	if c.ReplicaMaxLag == 0 {
		c.ReplicaMaxLag = DefaultReplicaMaxLag
	}
	if c.ReplicaCheckInterval == 0 {
		c.ReplicaCheckInterval = DefaultReplicaCheckInterval
	}
}

func (c *Config) validateReplicas(p *problems) {
	seen := map[Secret]bool{}
	for i, dsn := range c.Replicas {
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
	if c.ReplicaMaxLag < time.Millisecond {
		p.add("replica_max_lag", "must be at least 1ms, got %v", c.ReplicaMaxLag)
	}
	if c.ReplicaCheckInterval < 10*time.Millisecond || c.ReplicaCheckInterval > time.Minute {
		p.add("replica_check_interval", "must lie between 10ms and 1m, got %v", c.ReplicaCheckInterval)
	}
}
