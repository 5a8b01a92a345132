// Package proxy speaks the PostgreSQL wire protocol to analysts and answers
// their queries with differentially private results.
//
// Connection lifecycle (one goroutine per client owns both connections;
// each stage in its own file, session.go names them):
//
//  0. Admission (admission.go): the accept loop counts the connection
//     against limits.max_connections; over it, the client's startup is
//     answered 53300 after the same negotiation as below.
//  1. Negotiation (negotiate.go): SSLRequest is answered 'S' and the
//     connection upgraded when TLS is configured, 'N' otherwise;
//     GSSENCRequest is answered 'N'; a CancelRequest is looked up in the
//     server's key map and ends that session's current message: its waits,
//     and its upstream statement by a CancelRequest upstream (cancel.go; a
//     private query's at the end of its time slot, clock.go).
//  2. Authentication (auth.go) per config (trust, scram-sha-256, md5).
//     Unknown users go through the same exchange with throw-away
//     credentials, so a client cannot tell an unknown user from a wrong
//     password (both 28P01).
//  3. The session (begin.go) acquires one upstream connection from the pool
//     and keeps it until it ends, so SET, transactions and session state
//     behave as on PostgreSQL. Upstream connections run with
//     default_transaction_read_only, a pinned search_path and
//     limits.statement_timeout; the session's own SETs are limited by the
//     rewrite allowlist (a statement_timeout only shorter). Sessions are
//     counted per analyst (admission.go).
//  4. Query loop (loop.go): Receive, analyse every statement
//     (rewrite.Analyzer, after its guard against texts too deep or long for
//     the parser), refuse the whole string if any part is refused, else run
//     each part: pass-through statements are forwarded (a portal executed
//     with a row limit streams from a suspended portal upstream,
//     portal.go); private statements take a private-query slot, are charged
//     in the ledger, then run in their rewritten, bounded form, then noised
//     and encoded with the column names and types PostgreSQL gives the
//     original query. While a message is handled, a watcher cancels it if
//     the client goes away. A message's context ends with a CancelRequest,
//     its client gone or the end of a shutdown's grace, and with it every
//     wait (cancel.go). Between messages, a session idle for 0.5–1 s gives
//     back its 8 KiB read buffer and waits for the client without it
//     (sessionidle.go; what an idle session keeps: sessionmem.go).
//  5. Terminate, a broken connection, the idle timeout (deadlines.go) or
//     Shutdown (shutdown.go) ends the session; its upstream connection is
//     reset (DISCARD ALL) or destroyed (upstream.go).
package proxy
