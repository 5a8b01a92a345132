package proxy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/rewrite"
)

// Session settings. The upstream query connections start with
// rewrite.PinnedSettings (server.go), as startup parameters, so that
// RESET ALL and DISCARD ALL restore them; a client may change only
// rewrite's settable settings, by SET (checked by the analyzer) or by
// startup parameters (checked here). docs/threat-model.md, "One text, one
// meaning".

// startupSettings returns the client's startup parameters to apply to the
// upstream session, or an error when the client asks for a setting dpproxy
// pins (search_path, standard_conforming_strings, ...), for a client
// encoding other than UTF-8, for any other setting not on the allowlist
// (PostgreSQL would apply every startup parameter as a setting), or for
// something PostgreSQL would run as a backend switch. A statement_timeout
// must lie in (0, timeout], the proxy's limit (rewrite.CheckStatementTimeout).
func startupSettings(params map[string]string, timeout time.Duration) (names, values []string, err error) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic order, and errors
	add := func(k, v string) error {
		lk := strings.ToLower(k)
		switch {
		case lk == "client_encoding":
			// Pinned to UTF8 upstream; accepted only if it is UTF-8.
			return rewrite.CheckClientEncoding(v)
		case rewrite.SettableSetting(lk):
			if lk == "statement_timeout" {
				if err := rewrite.CheckStatementTimeout(v, timeout); err != nil {
					return err
				}
			}
			names, values = append(names, k), append(values, v)
			return nil
		}
		// PostgreSQL would apply any other parameter as a setting: refuse
		// it as SET would, rather than let the client believe it applies.
		return rewrite.SettingRefused(lk, -1)
	}
	for _, k := range keys {
		v := params[k]
		switch k {
		case "user", "database":
			continue
		case "replication":
			switch strings.ToLower(v) {
			case "", "false", "off", "no", "0":
				continue
			}
			return nil, nil, refuse(pgerr.FeatureNotSupported, "replication connections are not supported by dpproxy")
		case "options":
			opts, err := splitOptions(v)
			if err != nil {
				return nil, nil, err
			}
			for _, o := range opts {
				if err := add(o[0], o[1]); err != nil {
					return nil, nil, err
				}
			}
			continue
		}
		if err := add(k, v); err != nil {
			return nil, nil, err
		}
	}
	return names, values, nil
}

// splitOptions reads the startup parameter "options" as PostgreSQL does
// (pg_split_opts: words split at white space, a backslash takes the next
// character literally), accepting only its setting switches "-c
// name=value", "-cname=value" and "--name=value". Any other backend
// switch is refused.
func splitOptions(s string) ([][2]string, error) {
	var words []string
	var w strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
			continue
		case c == '\\' && i+1 < len(s):
			i++
			c = s[i]
		}
		w.WriteByte(c)
		in = true
	}
	if in {
		words = append(words, w.String())
	}
	var out [][2]string
	for i := 0; i < len(words); i++ {
		var nv string
		switch word := words[i]; {
		case word == "-c" && i+1 < len(words):
			i++
			nv = words[i]
		case strings.HasPrefix(word, "-c") && len(word) > 2:
			nv = word[2:]
		case strings.HasPrefix(word, "--") && len(word) > 2:
			nv = word[2:]
		default:
			return nil, refuse(pgerr.FeatureNotSupported, "startup option %q is not supported by dpproxy: only -c name=value settings may be given", word)
		}
		name, value, ok := strings.Cut(nv, "=")
		if !ok || name == "" {
			return nil, refuse(pgerr.FeatureNotSupported, "startup option %q is not of the form name=value", nv)
		}
		// PostgreSQL reads '-' in an option's name as '_'.
		out = append(out, [2]string{strings.ReplaceAll(name, "-", "_"), value})
	}
	return out, nil
}

// renderSettings returns the session's current values of the settings that
// change how an answer's values are rendered, read from the upstream once
// and again after every statement that may have changed one.
func (ss *session) renderSettings(ctx context.Context) (string, error) {
	if ss.render != "" {
		return ss.render, nil
	}
	rows, err := ss.upstream.Conn().PgConn().Exec(ctx, rewrite.RenderSettingsSQL).ReadAll()
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || len(rows[0].Rows) != 1 || len(rows[0].Rows[0]) != 1 {
		return "", fmt.Errorf("proxy: reading the session's settings: unexpected result")
	}
	ss.render = string(rows[0].Rows[0][0])
	return ss.render, nil
}
