package proxy

import "github.com/dpproxy/dpproxy/rewrite"

// Analyze returns the server's analysis of sql: the statements and plans
// its sessions would run, from the configuration and the upstream's
// catalog as read at start. It reads and runs nothing. The semantic
// differential test (e2e/semantic_test.go) reads a query's plan through
// it to know which released values the design lets differ from
// PostgreSQL's. The statements are shared with the sessions and must not
// be modified. Safe for concurrent use.
func (s *Server) Analyze(sql string) ([]*rewrite.Statement, error) {
	return s.analyze(sql)
}
