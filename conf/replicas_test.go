package conf

import (
	"strings"
	"testing"
	"time"
)

func TestReplicasParsed(t *testing.T) {
	c, err := Parse("r.yaml", []byte(good+`replicas: [postgres://dp@10.0.0.2/shop, postgres://dp@10.0.0.3/shop]
replica_max_lag: 2s
`), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Replicas) != 2 || c.Replicas[1].Reveal() != "postgres://dp@10.0.0.3/shop" {
		t.Errorf("replicas = %v", c.Replicas)
	}
	if c.ReplicaMaxLag != 2*time.Second || c.ReplicaCheckInterval != DefaultReplicaCheckInterval {
		t.Errorf("max lag %v, check interval %v", c.ReplicaMaxLag, c.ReplicaCheckInterval)
	}
	// Without the key: no replicas, as before.
	c, err = Parse("good.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Replicas) != 0 || c.ReplicaMaxLag != DefaultReplicaMaxLag {
		t.Errorf("defaults: %v, %v", c.Replicas, c.ReplicaMaxLag)
	}
}

func TestReplicasRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"replicas: ['']", "replicas[0]: empty"},
		{"replicas: [postgres://a/shop, postgres://a/shop]", "replicas[1]: listed twice"},
		{"replicas: [postgres://dp@127.0.0.1/shop]", "replicas[0]: is upstream itself"},
		{"replica_max_lag: -1s", "replica_max_lag: must be at least 1ms"},
		{"replica_check_interval: 2m", "replica_check_interval: must lie between"},
	} {
		_, err := Parse("r.yaml", []byte(good+tc.yaml+"\n"), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
