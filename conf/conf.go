// Package conf loads and validates dpproxy's YAML configuration.
//
// Load is strict: unknown keys (with the nearest known one), values of the
// wrong type, explicit zeros that would silently mean the default, missing
// bounds, privacy units that are not named and ε/δ out of range are all
// reported at once, in the order of the file, each naming the file, the
// line, the key path and the reason. The returned *Config is read-only after Load and is
// safe for concurrent use by any number of goroutines.
package conf

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Mechanism names accepted in privacy.mechanism and SET dp.mechanism.
const (
	Laplace  = "laplace"
	Gaussian = "gaussian"
)

// Accounting methods accepted in privacy.accounting.
const (
	// AccountingBasic is sequential composition: ε and δ of every charge
	// add up (Dwork & Roth, Thm. 3.16).
	AccountingBasic = "basic"
	// AccountingZCDP is a zero-concentrated DP filter (Bun & Steinke 2016):
	// ρ adds up and is converted to (ε, δ) with Canonne, Kamath & Steinke
	// 2020 at privacy.rdp_delta_share of δ, with basic composition as a
	// branch while every charge is pure ε (budget/zcdp.go).
	AccountingZCDP = "zcdp"
	// AccountingAdvanced is advanced composition (Dwork & Roth, Thm. 3.20)
	// as a privacy filter valid when each query's ε is chosen adaptively,
	// beside basic composition (budget/advanced.go); it sets aside
	// privacy.advanced_delta of every analyst's δ.
	AccountingAdvanced = "advanced"
	// AccountingRDP is Rényi DP over a grid of orders as a privacy
	// filter (budget/rdp.go), the default; it sets aside
	// privacy.rdp_delta_share of every analyst's δ for the conversion.
	AccountingRDP = "rdp"
)

// Auth methods accepted in auth.method.
const (
	AuthTrust = "trust"
	AuthSCRAM = "scram-sha-256"
	AuthMD5   = "md5"
)

// Defaults applied by Load where a key is absent.
const (
	DefaultListen             = "127.0.0.1:6432"
	DefaultEpsilon            = 1.0
	DefaultMaxEpsilonPerQuery = 2.0
	DefaultDelta              = 1e-7
	DefaultMaxGroupsPerUnit   = 4
	DefaultMaxRowsPerUnit     = 8
	DefaultLedger             = "postgres"
	DefaultAccounting         = AccountingRDP
	// DefaultRDPDeltaShare is privacy.rdp_delta_share: the part of each
	// analyst's δ the RDP filter spends on converting Rényi DP to (ε, δ);
	// the rest is for partition selection (budget/rdp.go).
	DefaultRDPDeltaShare = 0.9
	// DefaultAdvancedDelta is δ′ of advanced accounting
	// (privacy.advanced_delta): the probability that the privacy loss
	// exceeds the ε the filter certifies.
	DefaultAdvancedDelta = 1e-7
	// DefaultResponseQuantum and DefaultMaxQueryTime: see Privacy and
	// docs/threat-model.md, "Timing", for the measurements behind them.
	DefaultResponseQuantum = 100 * time.Millisecond
	DefaultMaxQueryTime    = 30 * time.Second
)

// Secret is a string that never prints: it implements slog.LogValuer and
// fmt.Stringer so that passwords and DSNs with passwords stay out of logs.
type Secret string

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String implements fmt.Stringer.
func (Secret) String() string { return "REDACTED" }

// Reveal returns the secret value. Call it only where the value is used.
func (s Secret) Reveal() string { return string(s) }

// Config is the whole configuration file.
type Config struct {
	// Path is the file the configuration was read from ("" if from bytes).
	Path   string `yaml:"-"`
	Listen string `yaml:"listen"`
	// Upstream is the DSN of the query role: analysts' statements run
	// under it, so it must reach nothing but the configured tables.
	Upstream Secret `yaml:"upstream"`
	// LedgerUpstream is the DSN of the ledger role, the one that owns
	// schema dpproxy; Load sets it to Upstream when absent (see
	// SharedLedger). A separate role puts the budgets out of reach of
	// any statement on a query connection.
	LedgerUpstream Secret            `yaml:"ledger_upstream"`
	TLS            *TLS              `yaml:"tls"`
	Auth           Auth              `yaml:"auth"`
	Privacy        Privacy           `yaml:"privacy"`
	Tables         map[string]*Table `yaml:"tables"`
	Metrics        Metrics           `yaml:"metrics"`
	Log            Log               `yaml:"log"`
	Limits         Limits            `yaml:"limits"`

	// Databases are further names a client may give at startup for the
	// database of Upstream (the "database" of its StartupMessage, libpq's
	// dbname), which is always accepted; any other is refused as
	// PostgreSQL refuses an unknown database. A client that names none is
	// taken to name its user name, as PostgreSQL does.
	Databases []string `yaml:"databases"`

	// Replicas are hot standbys of Upstream that take the analysts'
	// sessions, checked for health and lag (conf/replicas.go,
	// proxy/replicas.go).
	Replicas             []Secret      `yaml:"replicas"`
	ReplicaMaxLag        time.Duration `yaml:"replica_max_lag"`
	ReplicaCheckInterval time.Duration `yaml:"replica_check_interval"`
	// keys is what the file said, key by key (lines, keys given).
	keys *keyInfo
}

// SharedLedger reports whether the query connections and the ledger use
// one DSN (ledger_upstream absent or equal to upstream). Then one role
// both runs analysts' statements and may change budgets: a demo set-up,
// which check-config refuses and serve warns about.
func (c *Config) SharedLedger() bool { return c.LedgerUpstream == c.Upstream }

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen is the host:port serving /metrics over HTTP; "" serves none.
	Listen string `yaml:"listen"`
}

// Log configures the structured log (standard error).
type Log struct {
	Format string `yaml:"format"` // text (default) or json
	Level  string `yaml:"level"`  // debug, info (default), warn, error
}

// TLS holds the certificate and key files presented to clients.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Auth is how analysts authenticate to the proxy.
type Auth struct {
	Method string `yaml:"method"`
	Users  []User `yaml:"users"`
}

// User is one analyst with a lifetime budget.
type User struct {
	Name        string `yaml:"name"`
	PasswordEnv string `yaml:"password_env"`
	// Password is read from the environment variable PasswordEnv by Load.
	Password Secret `yaml:"-"`
	Budget   Budget `yaml:"budget"`
}

// Budget is a lifetime (ε, δ) budget.
type Budget struct {
	Epsilon float64 `yaml:"epsilon"`
	Delta   float64 `yaml:"delta"`
}

// Privacy holds per-query defaults and the ledger location.
type Privacy struct {
	Epsilon            float64 `yaml:"epsilon"`
	MaxEpsilonPerQuery float64 `yaml:"max_epsilon_per_query"`
	Delta              float64 `yaml:"delta"`
	Mechanism          string  `yaml:"mechanism"`
	Ledger             string  `yaml:"ledger"`
	// Accounting is how charges compose: rdp (default), basic, zcdp or
	// advanced.
	Accounting string `yaml:"accounting"`
	// AdvancedDelta is δ′ of advanced accounting, in (0, 1): the part of
	// each analyst's δ limit the advanced filter sets aside.
	AdvancedDelta float64 `yaml:"advanced_delta"`
	// RDPDeltaShare is the part of each analyst's δ limit, in (0, 1), the
	// RDP filter sets aside for its conversion to (ε, δ).
	RDPDeltaShare float64 `yaml:"rdp_delta_share"`
	// ResponseQuantum is the clock of private queries: an answer or error
	// is released at the end of the slot (a multiple of ResponseQuantum
	// since the query arrived) in which it became ready, so that its
	// timing says nothing finer about the rows read.
	ResponseQuantum time.Duration `yaml:"response_quantum"`
	// MaxQueryTime cuts a private query off: still running then, it is
	// cancelled and answered with the one opaque error, charge kept.
	MaxQueryTime time.Duration `yaml:"max_query_time"`
	// AutoBoundsShare is the part of a query's ε, in (0, 1), that buys
	// the clamping bounds of a column declared bounds: auto
	// (autobounds.go); the rest answers the query.
	AutoBoundsShare float64 `yaml:"auto_bounds_share"`
}

// Table describes one configured table. Tables not configured are refused.
type Table struct {
	// Schema and Name are filled in by Load from the map key ("public" if
	// the key has no schema). Both are lower case, as PostgreSQL folds
	// unquoted identifiers.
	Schema string `yaml:"-"`
	Name   string `yaml:"-"`

	// Public tables are not sensitive: they may be read and joined freely.
	Public           bool               `yaml:"public"`
	PrivacyUnit      string             `yaml:"privacy_unit"`
	MaxGroupsPerUnit int64              `yaml:"max_groups_per_unit"`
	MaxRowsPerUnit   int64              `yaml:"max_rows_per_unit"`
	Columns          map[string]*Column `yaml:"columns"`
	// Budget, when set, is the table's lifetime budget: every analyst's
	// queries over the table count against it together, so that no
	// coalition of analysts learns more about its rows than it allows
	// (budget/tables.go). Only private tables take one.
	Budget *Budget `yaml:"budget"`
	// Bias is the measured effect of the bounds (metadata.go), or nil.
	Bias *TableBias `yaml:"bias,omitempty"`
}

// QualifiedName is "schema.name".
func (t *Table) QualifiedName() string { return t.Schema + "." + t.Name }

// Column holds what is known about one column of a private table.
type Column struct {
	// Lower and Upper are the clamping bounds for SUM/AVG; nil when absent.
	Lower *float64 `yaml:"lower"`
	Upper *float64 `yaml:"upper"`
	// Bounds is "auto" when the clamping bounds are chosen at query time
	// with DP (autobounds.go), instead of lower and upper; "" otherwise.
	Bounds string `yaml:"bounds,omitempty"`
	// AutoBoundsShare, with bounds: auto, overrides
	// privacy.auto_bounds_share for this column; nil when absent.
	AutoBoundsShare *float64 `yaml:"auto_bounds_share,omitempty"`
	// PublicValues, when set, are the group keys that may be released
	// without partition selection; every one of them always appears.
	PublicValues []string `yaml:"-"`
	// PublicValuesFrom, when set, names the public table's column whose
	// values the proxy reads into PublicValues when it starts
	// (publicvalues.go).
	PublicValuesFrom *PublicValuesFrom `yaml:"-"`
	// PublicValuesYAML is public_values as written: a list, or
	// {table, column}.
	PublicValuesYAML PublicValuesYAML `yaml:"public_values,omitempty"`
	// Bias is the measured effect of clamping (metadata.go), or nil.
	Bias *ColumnBias `yaml:"bias,omitempty"`
}

// HasBounds reports whether both clamping bounds are set.
func (c *Column) HasBounds() bool { return c != nil && c.Lower != nil && c.Upper != nil }

// Table returns the configured table for schema and name (both compared
// as given; callers fold case as PostgreSQL does), or nil.
func (c *Config) Table(schema, name string) *Table {
	return c.Tables[schema+"."+name]
}

// TableBudgets returns the budget of every private table that has one,
// keyed by its qualified name ("schema.name").
func (c *Config) TableBudgets() map[string]Budget {
	out := make(map[string]Budget)
	for _, t := range c.Tables {
		if t != nil && !t.Public && t.Budget != nil {
			out[t.QualifiedName()] = *t.Budget
		}
	}
	return out
}

// UserByName returns the configured analyst or nil.
func (c *Config) UserByName(name string) *User {
	for i := range c.Auth.Users {
		if c.Auth.Users[i].Name == name {
			return &c.Auth.Users[i]
		}
	}
	return nil
}

// Load reads, decodes, defaults and validates the file at path. Passwords are
// read from the environment variables the file names.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conf: %w", err)
	}
	return Parse(path, data, os.Getenv)
}

// Parse decodes and validates data as if read from path; getenv resolves
// password_env (os.Getenv in production). Every problem is reported at
// once, each with the file, the line, the key path and the reason; an
// unknown key comes with the nearest known one.
func Parse(path string, data []byte, getenv func(string) string) (*Config, error) {
	c, err := ParseAll(path, data, getenv)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// LoadAll is Load that also returns what it could read of an invalid
// configuration (nil only when the file cannot be read or is not YAML),
// so that check-config can check the upstream in the same run.
func LoadAll(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conf: %w", err)
	}
	return ParseAll(path, data, os.Getenv)
}

// ParseAll is Parse that also returns what it could read of an invalid
// configuration (nil only when data is not YAML). Such a Config is for
// reports only: never serve with it.
func ParseAll(path string, data []byte, getenv func(string) string) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("conf: %s: %w", path, err)
	}
	var c Config
	p := &problems{path: path}
	if path == "" {
		p.path = "config"
	}
	if root.Kind != 0 {
		keys := readKeys(&root, reflect.TypeOf(c))
		p.keys = keys
		for _, u := range keys.unknowns {
			msg := fmt.Sprintf("%s:%d: %s: unknown key", p.path, u.line, join(u.path, u.key))
			if u.suggest != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", join(u.path, u.suggest))
			}
			p.push(u.line, errors.New(msg))
		}
		if err := root.Decode(&c); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				return nil, fmt.Errorf("conf: %s: %w", path, err)
			}
			keys.typeErrors(p, te)
		}
	}
	c.Path = path
	c.keys = p.keys
	c.applyDefaults()
	p.keys.explicitZeros(p, reflect.ValueOf(&c), "")
	c.validate(p, getenv)
	if p.keys != nil {
		p.keys.nodes = nil // the values, DSNs with passwords among them, are not kept
	}
	return &c, errors.Join(p.sorted()...)
}

// Where returns "FILE:LINE" of key (a key path such as
// "tables.public.orders.privacy_unit" as the file spells it), or of its
// nearest enclosing key the file gives, or "FILE" when none is known.
func (c *Config) Where(key string) string {
	path := c.Path
	if path == "" {
		path = "config"
	}
	if l := c.keys.line(key); l > 0 {
		return fmt.Sprintf("%s:%d", path, l)
	}
	return path
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.LedgerUpstream == "" {
		c.LedgerUpstream = c.Upstream
	}
	if c.Auth.Method == "" {
		c.Auth.Method = AuthSCRAM
	}
	if c.Privacy.Epsilon == 0 {
		c.Privacy.Epsilon = DefaultEpsilon
	}
	if c.Privacy.MaxEpsilonPerQuery == 0 {
		c.Privacy.MaxEpsilonPerQuery = math.Max(DefaultMaxEpsilonPerQuery, c.Privacy.Epsilon)
	}
	if c.Privacy.Delta == 0 {
		c.Privacy.Delta = DefaultDelta
	}
	if c.Privacy.Mechanism == "" {
		c.Privacy.Mechanism = Laplace
	}
	if c.Privacy.AutoBoundsShare == 0 {
		c.Privacy.AutoBoundsShare = DefaultAutoBoundsShare
	}
	if c.Privacy.Ledger == "" {
		c.Privacy.Ledger = DefaultLedger
	}
	if c.Privacy.AdvancedDelta == 0 {
		c.Privacy.AdvancedDelta = DefaultAdvancedDelta
	}
	if c.Privacy.RDPDeltaShare == 0 {
		c.Privacy.RDPDeltaShare = DefaultRDPDeltaShare
	}
	if c.Privacy.Accounting == "" {
		c.Privacy.Accounting = DefaultAccounting
	}
	if c.Privacy.ResponseQuantum == 0 {
		c.Privacy.ResponseQuantum = DefaultResponseQuantum
	}
	if c.Privacy.MaxQueryTime == 0 {
		c.Privacy.MaxQueryTime = DefaultMaxQueryTime
	}
	c.Limits.applyDefaults()
	c.applyReplicaDefaults()
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	for _, t := range c.Tables {
		if t == nil || t.Public {
			continue
		}
		if t.MaxGroupsPerUnit == 0 {
			t.MaxGroupsPerUnit = DefaultMaxGroupsPerUnit
		}
		if t.MaxRowsPerUnit == 0 {
			t.MaxRowsPerUnit = DefaultMaxRowsPerUnit
		}
	}
}

// problems collects validation errors, each naming file, key and reason.
type problems struct {
	path  string
	keys  *keyInfo
	errs  []error
	lines []int // of each of errs, 0 when unknown
}

func (p *problems) add(key, format string, args ...any) {
	where := p.path
	l := p.keys.line(key)
	if l > 0 {
		where = fmt.Sprintf("%s:%d", p.path, l)
	}
	p.push(l, fmt.Errorf("%s: %s: %s", where, key, fmt.Sprintf(format, args...)))
}

// push records a problem found at line (0: none known).
func (p *problems) push(line int, err error) {
	p.errs = append(p.errs, err)
	p.lines = append(p.lines, line)
}

// sorted returns the problems in the order of their lines in the file,
// those without a line last.
func (p *problems) sorted() []error {
	idx := make([]int, len(p.errs))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) int {
		if p.lines[i] == 0 {
			return math.MaxInt
		}
		return p.lines[i]
	}
	sort.SliceStable(idx, func(a, b int) bool { return key(idx[a]) < key(idx[b]) })
	out := make([]error, len(idx))
	for i, j := range idx {
		out[i] = p.errs[j]
	}
	return out
}

// ValidEpsilon reports whether eps is a usable per-query or budget ε:
// finite and strictly positive (NaN fails too).
func ValidEpsilon(eps float64) bool { return eps > 0 && !math.IsInf(eps, 0) }

// ValidDelta reports whether delta lies in [0, 1) (NaN fails).
func ValidDelta(delta float64) bool { return delta >= 0 && delta < 1 }

func (c *Config) validate(p *problems, getenv func(string) string) {
	if c.Upstream == "" {
		p.add("upstream", "missing: a postgres:// URL the proxy connects with")
	}
	if c.TLS != nil && (c.TLS.Cert == "" || c.TLS.Key == "") {
		p.add("tls", "both cert and key are required")
	}
	switch c.Auth.Method {
	case AuthTrust, AuthSCRAM, AuthMD5:
	default:
		p.add("auth.method", "%q is not one of trust, scram-sha-256, md5", c.Auth.Method)
	}
	if len(c.Auth.Users) == 0 {
		p.add("auth.users", "no analysts configured")
	}
	seen := map[string]bool{}
	for i := range c.Auth.Users {
		u := &c.Auth.Users[i]
		key := fmt.Sprintf("auth.users[%d]", i)
		if u.Name == "" {
			p.add(key+".name", "missing")
		} else if seen[u.Name] {
			p.add(key+".name", "duplicate analyst %q", u.Name)
		} else if strings.HasPrefix(u.Name, "@") {
			p.add(key+".name", "%q: names starting with @ are the ledger's own (@operator records what operator tools spend)", u.Name)
		}
		seen[u.Name] = true
		if c.Auth.Method != AuthTrust {
			if u.PasswordEnv == "" {
				p.add(key+".password_env", "missing: required by auth.method %s", c.Auth.Method)
			} else if pw := getenv(u.PasswordEnv); pw == "" {
				p.add(key+".password_env", "environment variable %s is empty or unset", u.PasswordEnv)
			} else {
				u.Password = Secret(pw)
			}
		}
		if !ValidEpsilon(u.Budget.Epsilon) {
			p.add(key+".budget.epsilon", "must be a finite number > 0, got %v", u.Budget.Epsilon)
		}
		if !ValidDelta(u.Budget.Delta) {
			p.add(key+".budget.delta", "must lie in [0, 1), got %v", u.Budget.Delta)
		}
	}
	pr := c.Privacy
	if !ValidEpsilon(pr.Epsilon) {
		p.add("privacy.epsilon", "must be a finite number > 0, got %v", pr.Epsilon)
	}
	if !ValidEpsilon(pr.MaxEpsilonPerQuery) {
		p.add("privacy.max_epsilon_per_query", "must be a finite number > 0, got %v", pr.MaxEpsilonPerQuery)
	} else if pr.Epsilon > pr.MaxEpsilonPerQuery {
		p.add("privacy.epsilon", "%v exceeds privacy.max_epsilon_per_query %v", pr.Epsilon, pr.MaxEpsilonPerQuery)
	}
	if !ValidDelta(pr.Delta) || pr.Delta == 0 {
		p.add("privacy.delta", "must lie in (0, 1), got %v", pr.Delta)
	}
	validateAutoBoundsShare(p, pr.AutoBoundsShare)
	switch pr.Mechanism {
	case Laplace, Gaussian:
	default:
		p.add("privacy.mechanism", "%q is not one of laplace, gaussian", pr.Mechanism)
	}
	if pr.Ledger != "postgres" && !strings.HasPrefix(pr.Ledger, "file:") {
		p.add("privacy.ledger", "%q is not postgres or file:PATH", pr.Ledger)
	} else if strings.HasPrefix(pr.Ledger, "file:") {
		p.add("privacy.ledger", "file ledgers are not supported: a file cannot be shared safely by several proxies nor hold the answer cache; use postgres (schema dpproxy in the upstream, or any PostgreSQL)")
	}
	switch pr.Accounting {
	case AccountingBasic, AccountingZCDP, AccountingAdvanced, AccountingRDP:
	default:
		p.add("privacy.accounting", "%q is not one of rdp, basic, zcdp, advanced", pr.Accounting)
	}
	if !(pr.RDPDeltaShare > 0 && pr.RDPDeltaShare < 1) {
		p.add("privacy.rdp_delta_share", "must lie in (0, 1), got %v", pr.RDPDeltaShare)
	}
	if !(pr.AdvancedDelta > 0 && pr.AdvancedDelta < 1) {
		p.add("privacy.advanced_delta", "must lie in (0, 1), got %v", pr.AdvancedDelta)
	}
	switch {
	case pr.ResponseQuantum < time.Millisecond || pr.ResponseQuantum > time.Minute:
		p.add("privacy.response_quantum", "must lie between 1ms and 1m, got %v", pr.ResponseQuantum)
	case pr.MaxQueryTime < pr.ResponseQuantum:
		p.add("privacy.max_query_time", "must be at least privacy.response_quantum (%v), got %v", pr.ResponseQuantum, pr.MaxQueryTime)
	}
	c.Limits.validate(p)
	c.validateReplicas(p)
	if len(c.Tables) == 0 {
		p.add("tables", "no tables configured: every table would be refused")
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			p.add("metrics.listen", "%q is not host:port", c.Metrics.Listen)
		}
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		p.add("log.format", "%q is not one of text, json", c.Log.Format)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(c.Log.Level)); err != nil {
		p.add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	tables := make(map[string]*Table, len(c.Tables))
	keys := make([]string, 0, len(c.Tables))
	for k := range c.Tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t := c.Tables[k]
		key := "tables." + k
		schema, name, ok := splitTableName(k)
		if !ok {
			p.add(key, "not a table name: use schema.table or table")
			continue
		}
		if t == nil {
			p.add(key, "empty: give privacy_unit and bounds, or public: true")
			continue
		}
		t.Schema, t.Name = schema, name
		if prev, dup := tables[t.QualifiedName()]; dup && prev != t {
			p.add(key, "configured twice (as %s)", t.QualifiedName())
		}
		tables[t.QualifiedName()] = t
		validateTable(p, key, t)
		p.keys.alias(key, "tables."+t.QualifiedName(), true)
	}
	c.Tables = tables
	validatePublicValuesFrom(p, tables) // publicvalues.go
}

func validateTable(p *problems, key string, t *Table) {
	if t.Public {
		if t.PrivacyUnit != "" || len(t.Columns) > 0 || t.MaxGroupsPerUnit != 0 || t.MaxRowsPerUnit != 0 || t.Bias != nil {
			p.add(key, "a public table takes no privacy_unit, bounds or columns")
		}
		if t.Budget != nil {
			p.add(key+".budget", "a public table takes no budget: its rows are released without noise")
		}
		return
	}
	if b := t.Budget; b != nil {
		if !ValidEpsilon(b.Epsilon) {
			p.add(key+".budget.epsilon", "must be a finite number > 0, got %v", b.Epsilon)
		}
		if !ValidDelta(b.Delta) {
			p.add(key+".budget.delta", "must lie in [0, 1), got %v", b.Delta)
		}
	}
	if t.PrivacyUnit == "" {
		p.add(key+".privacy_unit", "missing: name the column that identifies the person protected (or set public: true)")
	} else if !isIdent(t.PrivacyUnit) {
		p.add(key+".privacy_unit", "%q is not a column name", t.PrivacyUnit)
	}
	if t.MaxGroupsPerUnit < 1 {
		p.add(key+".max_groups_per_unit", "must be >= 1, got %d", t.MaxGroupsPerUnit)
	}
	if t.MaxRowsPerUnit < 1 {
		p.add(key+".max_rows_per_unit", "must be >= 1, got %d", t.MaxRowsPerUnit)
	}
	cols := make(map[string]*Column, len(t.Columns))
	for name, col := range t.Columns {
		ck := key + ".columns." + name
		if !isIdent(name) {
			p.add(ck, "not a column name")
			continue
		}
		if col == nil {
			p.add(ck, "empty: give lower and upper, or public_values")
			continue
		}
		lname := strings.ToLower(name)
		cols[lname] = col
		col.applyPublicValuesYAML()
		if lname == strings.ToLower(t.PrivacyUnit) {
			p.add(ck, "the privacy unit takes no bounds or public values")
		}
		if (col.Lower == nil) != (col.Upper == nil) {
			p.add(ck, "both lower and upper are required for clamping")
		}
		if col.HasBounds() {
			lo, hi := *col.Lower, *col.Upper
			if math.IsNaN(lo) || math.IsInf(lo, 0) || math.IsNaN(hi) || math.IsInf(hi, 0) {
				p.add(ck, "bounds must be finite")
			} else if lo > hi {
				p.add(ck, "lower %v is greater than upper %v", lo, hi)
			}
		}
		if col.PublicValues != nil && len(col.PublicValues) == 0 {
			p.add(ck+".public_values", "empty list")
		}
		validateAutoBounds(p, ck, col)
		if !col.HasBounds() && !col.AutoBounds() && col.PublicValues == nil && col.PublicValuesFrom == nil && col.Lower == nil {
			p.add(ck, "give lower and upper, bounds: auto, or public_values")
		}
		validateColumnBias(p, ck, col)
	}
	validateTableBias(p, key, t)
	t.Columns = cols
	t.PrivacyUnit = strings.ToLower(t.PrivacyUnit)
}

// splitTableName splits "schema.table" or "table" (schema public), folding
// case as PostgreSQL does for unquoted identifiers.
func splitTableName(k string) (schema, name string, ok bool) {
	parts := strings.Split(k, ".")
	switch len(parts) {
	case 1:
		schema, name = "public", parts[0]
	case 2:
		schema, name = parts[0], parts[1]
	default:
		return "", "", false
	}
	if !isIdent(schema) || !isIdent(name) {
		return "", "", false
	}
	return strings.ToLower(schema), strings.ToLower(name), true
}

// isIdent reports whether s is a plain SQL identifier (letters, digits,
// underscores, not starting with a digit).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
