package proxy

import (
	"context"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Private-query slots: limits.max_concurrent_private_queries and its
// per-analyst share, taken by execute (query.go) before anything is
// charged.

// acquirePrivate waits for a slot for one private query of analyst: one of
// the analyst's limits.max_concurrent_private_queries_per_analyst, then one
// of the server's limits.max_concurrent_private_queries, so that one analyst
// cannot hold every slot. The wait ends after limits.private_query_wait, or
// when ctx ends (a CancelRequest, the client gone, the shutdown), with
// 57014: before anything is read or charged. The caller must call release.
func (l *limiter) acquirePrivate(ctx context.Context, analyst string) (release func(), err error) {
	l.mu.Lock()
	mine := l.mine[analyst]
	if mine == nil {
		mine = make(chan struct{}, l.cfg.MaxConcurrentPrivatePerAnalyst)
		l.mine[analyst] = mine
	}
	l.mu.Unlock()
	release = func() { <-l.private; <-mine }
	// The common case, a free slot, without a timer.
	select {
	case mine <- struct{}{}:
		select {
		case l.private <- struct{}{}:
			return release, nil
		default:
		}
		<-mine
	default:
	}
	wait := time.NewTimer(l.cfg.PrivateQueryWait)
	defer wait.Stop()
	select {
	case mine <- struct{}{}:
	case <-wait.C:
		return nil, fail(pgerr.QueryCanceled, "canceling statement: %d private queries of analyst %q are already in progress, and none ended within %v (limits.max_concurrent_private_queries_per_analyst, limits.private_query_wait)",
			cap(mine), analyst, l.cfg.PrivateQueryWait)
	case <-ctx.Done():
		return nil, canceledWaiting(ctx, "a private-query slot")
	}
	select {
	case l.private <- struct{}{}:
		return release, nil
	case <-wait.C:
		<-mine
		return nil, fail(pgerr.QueryCanceled, "canceling statement: all %d private-query slots of the proxy are in use, and none came free within %v (limits.max_concurrent_private_queries, limits.private_query_wait)",
			cap(l.private), l.cfg.PrivateQueryWait)
	case <-ctx.Done():
		<-mine
		return nil, canceledWaiting(ctx, "a private-query slot")
	}
}
