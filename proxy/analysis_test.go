package proxy

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

func TestRefusedText(t *testing.T) {
	deep := &rewrite.RejectError{Code: pgerr.StatementTooComplex}
	if got := refusedText("SELECT ((1))", deep); got != "" {
		t.Errorf("refusedText of a guard refusal = %q: it would be fingerprinted by pg_query", got)
	}
	other := &rewrite.RejectError{Code: pgerr.InsufficientPrivilege}
	if got := refusedText("SELECT 1", other); got != "SELECT 1" {
		t.Errorf("refusedText of another refusal = %q", got)
	}
}

// TestAnalysisSlots: texts too long for the parse cache are analysed at
// most GOMAXPROCS at a time; a wait for a slot ends at a cancel (57014),
// and short texts never wait.
func TestAnalysisSlots(t *testing.T) {
	srv := benchServer(t)
	srv.lim = newLimiter(srv.cfg.Limits)
	ss := benchSession(srv, io.Discard, conf.Laplace, 1, 1e-7)
	long := "SELECT 1 /*" + strings.Repeat("x", parseCacheMaxText) + "*/"
	for range cap(srv.lim.analysis) {
		srv.lim.analysis <- struct{}{}
	}
	if _, err := ss.analyze(context.Background(), "SELECT 1"); err != nil {
		t.Errorf("a short text waited for a slot of long ones: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := ss.analyze(ctx, long); !hasCode(err, pgerr.QueryCanceled) {
		t.Errorf("a cancelled wait for an analysis slot: %v, want 57014", err)
	}
	<-srv.lim.analysis
	if _, err := ss.analyze(context.Background(), long); err != nil {
		t.Errorf("a long text with a free slot: %v", err)
	}
	if n := len(srv.lim.analysis); n != cap(srv.lim.analysis)-1 {
		t.Errorf("%d analysis slots taken after the analysis, want %d", n, cap(srv.lim.analysis)-1)
	}
}
