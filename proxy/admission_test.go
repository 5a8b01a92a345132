package proxy

import (
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

func TestAnalystConnections(t *testing.T) {
	l := newLimiter(conf.Limits{MaxConnectionsPerAnalyst: 2})
	if !l.enterAnalyst("a") || !l.enterAnalyst("a") {
		t.Fatal("analyst a refused below the limit")
	}
	if l.enterAnalyst("a") {
		t.Error("a third session of analyst a admitted")
	}
	if !l.enterAnalyst("b") {
		t.Error("analyst b refused because of a")
	}
	l.leaveAnalyst("a")
	if !l.enterAnalyst("a") {
		t.Error("analyst a refused after one of its sessions left")
	}
}
