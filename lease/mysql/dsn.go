package mysql

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"
)

// The DSN is a URL: mysql://user:password@host:port/database?param=value,
// with '@', '/', '?', '#' and '%' %-encoded wherever they occur after the
// user (in the password, in parameter values). Only the driver parameters
// in driverParams may be given; the ones in fixedParams leaderrun sets
// itself. Any other parameter, and any parameter given twice, is refused.

// schemes are the URL schemes Open accepts.
var schemes = []string{"mysql", "mariadb"}

// defaultPort is MySQL's port, used when the DSN names none.
const defaultPort = "3306"

// defaultDialTimeout bounds connecting unless the DSN sets timeout.
const defaultDialTimeout = 10 * time.Second

// driverParams are the go-sql-driver/mysql parameters a DSN may set, and
// what each takes.
var driverParams = map[string]string{
	"tls":                      "true, false or skip-verify",
	"timeout":                  "a duration (dialing)",
	"readTimeout":              "a duration (reading a reply; not applied to wake-up sessions)",
	"writeTimeout":             "a duration",
	"allowCleartextPasswords":  "a boolean",
	"allowNativePasswords":     "a boolean",
	"allowOldPasswords":        "a boolean",
	"allowFallbackToPlaintext": "false (true is refused)",
	"compress":                 "a boolean",
	"connectionAttributes":     "key:value pairs",
	"maxAllowedPacket":         "a number of bytes",
}

// fixedParams are driver parameters leaderrun sets itself: its statements
// depend on them.
var fixedParams = []string{
	"allowAllFiles", "charset", "checkConnLiveness", "clientFoundRows", "collation",
	"columnsWithAlias", "interpolateParams", "loc", "multiStatements", "parseTime",
	"rejectReadOnly", "serverPubKey", "strict", "timeTruncate",
}

// tlsModes are the values of tls that need no TLS configuration registered
// in code, but preferred: see errDowngrade.
var tlsModes = []string{"true", "false", "1", "0", "skip-verify"}

// errDowngrade explains the refusal of tls=preferred and
// allowFallbackToPlaintext=true. With either, the driver drops TLS when a
// server's handshake does not offer it, and it does so in the
// configuration that every connection of the pool shares: one handshake
// stripped by whoever sits on the path made the whole pool, and every
// password and lease after it, plaintext.
var errDowngrade = errors.New("one handshake without TLS (stripped on the path) turns TLS off for every later connection; " +
	"use tls=true (or skip-verify), or no tls parameter for plaintext")

// errMalformed is what a DSN that does not parse as a URL is refused with.
// It echoes nothing of the DSN, which may hold a password in any position.
var errMalformed = errors.New("malformed DSN: write mysql://user:password@host:3306/database, " +
	"with special characters in the password %-encoded (@ as %40, / as %2F, : as %3A)")

// dsn is a parsed DSN.
type dsn struct {
	cfg      *driver.Config
	describe string   // the DSN without its password
	secrets  []string // the password as written and decoded
}

// parseDSN parses a mysql:// URL into the driver's configuration. Its
// errors never contain the password.
func parseDSN(s string) (*dsn, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !slices.Contains(schemes, scheme) {
		return nil, fmt.Errorf("DSN must start with mysql:// or mariadb://")
	}
	// A password with an unescaped '/', '?' or '#' ends the authority
	// early and leaves its '@' behind: every part after that may hold a
	// piece of the password, so refuse without echoing any of it.
	if i := strings.IndexAny(rest, "/?#"); i >= 0 && strings.Contains(rest[i:], "@") {
		return nil, fmt.Errorf("%w (an '@' after the host)", errMalformed)
	}
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Fragment != "" || u.RawFragment != "" {
		return nil, errMalformed
	}
	d := &dsn{}
	if pw, ok := u.User.Password(); ok {
		d.secrets = secretForms(pw, rawPassword(s))
	}
	switch {
	case u.User == nil || u.User.Username() == "":
		return nil, fmt.Errorf("DSN names no user (mysql://USER:password@host/database)")
	case u.Hostname() == "":
		return nil, fmt.Errorf("DSN names no host")
	}
	db := strings.TrimPrefix(u.Path, "/")
	switch {
	case db == "":
		return nil, fmt.Errorf("DSN names no database (mysql://user@host/DATABASE)")
	case strings.Contains(db, "/"):
		return nil, fmt.Errorf("database name %q contains '/'", db)
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	params, err := checkParams(u.RawQuery)
	if err != nil {
		return nil, err
	}
	// The driver parses its own parameters from a DSN that carries no
	// credentials, so that its errors cannot echo them.
	cfg, err := driver.ParseDSN("/?" + params.Encode())
	if err != nil {
		return nil, fmt.Errorf("DSN parameters: %w", err)
	}
	if cfg.AllowFallbackToPlaintext {
		return nil, fmt.Errorf("allowFallbackToPlaintext=%s is refused: %w", params.Get("allowFallbackToPlaintext"), errDowngrade)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(u.Hostname(), port)
	cfg.DBName = db
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultDialTimeout
	}
	d.cfg = cfg
	d.describe = describe(u)
	return d, nil
}

// checkParams refuses unknown, fixed and repeated parameters and TLS
// configuration names that only code could register.
func checkParams(rawQuery string) (url.Values, error) {
	params, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("DSN parameters: %w", err)
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := params[k]
		switch {
		case len(v) > 1:
			return nil, fmt.Errorf("parameter %s given %d times", k, len(v))
		case slices.Contains(fixedParams, k):
			return nil, fmt.Errorf("parameter %s: leaderrun sets it itself", k)
		case driverParams[k] == "":
			known := make([]string, 0, len(driverParams))
			for p := range driverParams {
				known = append(known, p)
			}
			slices.Sort(known)
			return nil, fmt.Errorf("unknown parameter %s (known: %s)", k, strings.Join(known, ", "))
		case k == "tls" && strings.EqualFold(v[0], "preferred"):
			return nil, fmt.Errorf("tls=%s is refused: %w", v[0], errDowngrade)
		case k == "tls" && !slices.Contains(tlsModes, strings.ToLower(v[0])):
			return nil, fmt.Errorf("tls=%q: want %s", v[0], driverParams["tls"])
		}
	}
	return params, nil
}

// rawPassword is the password as a DSN that parsed spells it, %-escapes
// included: its authority ends at the first '/', '?' or '#', and its user
// information at the authority's last '@'.
func rawPassword(s string) string {
	_, rest, _ := strings.Cut(s, "://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// secretForms returns the forms of a password that a message could show.
func secretForms(forms ...string) []string {
	var out []string
	for _, f := range forms {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// describe is the DSN without its password.
func describe(u *url.URL) string {
	c := *u
	c.User = url.User(u.User.Username())
	return c.String()
}

// redact describes a DSN for a message: without its password when it
// parses, and only by its scheme when it does not.
func redact(s string) string {
	if d, err := parseDSN(s); err == nil {
		return d.describe
	}
	scheme, _, _ := strings.Cut(s, ":")
	return scheme + "://…"
}
