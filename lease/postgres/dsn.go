package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/leaderrun/leaderrun/internal/lazyre"
	"github.com/leaderrun/leaderrun/lease"
)

// DSN query parameters that leaderrun reads itself. They are removed before
// the DSN reaches pgx, which would send unknown parameters to the server.
const (
	paramSchema = "leaderrun_schema"
	paramListen = "leaderrun_listen"
)

// DefaultSchema is the schema that holds the lease table when the DSN does
// not name one with leaderrun_schema.
const DefaultSchema = "leaderrun"

// options are leaderrun's own DSN parameters.
type options struct {
	schema string
	listen bool
	// execModeSet reports that the DSN chose pgx's default_query_exec_mode.
	execModeSet bool
}

var schemaPattern = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// splitDSN separates leaderrun's parameters from the DSN that pgx parses.
// leaderrun's parameters are only read from URL DSNs (postgres://…); a
// keyword/value DSN is passed to pgx as it is. The other query parameters
// are kept byte for byte: like libpq, pgx decodes only %XX escapes (a '+'
// stays a '+'), so they must not be re-encoded.
func splitDSN(dsn string) (string, options, error) {
	opts := options{schema: DefaultSchema, listen: true}
	if !isURL(dsn) {
		if scheme, _, _ := strings.Cut(dsn, ":"); scheme == "postgres" || scheme == "postgresql" {
			return "", opts, fmt.Errorf("%s: without //: write postgres://USER@HOST/DB for a URL, or keyword=value pairs without a scheme", scheme)
		}
		opts.execModeSet = strings.Contains(dsn, "default_query_exec_mode")
		return dsn, opts, nil
	}
	base, query, _ := strings.Cut(dsn, "?")
	var kept []string
	seen := map[string]bool{}
	for _, p := range queryPairs(query) {
		if seen[p.key] {
			return "", opts, fmt.Errorf("parameter %s given twice", p.key)
		}
		seen[p.key] = true
		switch {
		case p.key == "default_query_exec_mode":
			opts.execModeSet = true
		case !strings.HasPrefix(p.key, "leaderrun_"):
		case p.key == paramSchema:
			if !schemaPattern.MatchString(p.value) {
				return "", opts, fmt.Errorf("%s=%q: want 1 to 63 letters, digits or underscores, not starting with a digit", paramSchema, p.value)
			}
			if reservedSchema(p.value) {
				return "", opts, fmt.Errorf("%s=%q: a system schema; name a schema of leaderrun's own", paramSchema, p.value)
			}
			opts.schema = p.value
			continue
		case p.key == paramListen:
			switch strings.ToLower(p.value) {
			case "on", "true", "1", "yes":
				opts.listen = true
			case "off", "false", "0", "no":
				opts.listen = false
			default:
				return "", opts, fmt.Errorf("%s=%q: want on or off", paramListen, p.value)
			}
			continue
		default:
			return "", opts, fmt.Errorf("unknown parameter %s (known: %s, %s)", p.key, paramSchema, paramListen)
		}
		kept = append(kept, p.raw)
	}
	if len(kept) == 0 {
		return base, opts, nil
	}
	return base + "?" + strings.Join(kept, "&"), opts, nil
}

// queryPair is one key=value of a URL DSN's query, as written and decoded.
type queryPair struct {
	raw        string
	key, value string
}

// queryPairs splits a URL DSN's query as libpq does: pairs separated by
// '&', key and value %XX-decoded. A pair that does not decode keeps its raw
// text as key, for pgx to reject.
func queryPairs(query string) []queryPair {
	var pairs []queryPair
	for _, raw := range strings.Split(query, "&") {
		if raw == "" {
			continue
		}
		k, v, _ := strings.Cut(raw, "=")
		key, err := url.PathUnescape(k)
		if err != nil {
			key = k
		}
		value, err := url.PathUnescape(v)
		if err != nil {
			value = v
		}
		pairs = append(pairs, queryPair{raw: raw, key: key, value: value})
	}
	return pairs
}

// parseError is the refusal of a DSN that pgx cannot parse. pgx's message
// quotes the DSN, or the part of it that failed, which may be a piece of a
// password that was not percent-encoded: it is shown only for a DSN
// without a password.
func parseError(dsn string, err error) error {
	if len(dsnSecrets(dsn)) > 0 {
		err = errors.New("cannot parse it (the details are not shown: they may quote the password); " +
			"percent-encode '@', ':', '/', '?', '#' and '%' in a password, as %40, %3A, %2F, %3F, %23 and %25")
	}
	return lease.Refused(err)
}

// reservedSchema reports whether PostgreSQL keeps schema for itself.
func reservedSchema(schema string) bool {
	s := strings.ToLower(schema)
	return strings.HasPrefix(s, "pg_") || s == "information_schema"
}

func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// keywordPassword matches a password in a keyword/value DSN, quoted or not.
var keywordPassword = lazyre.New(`(?i)\b(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)

// redact returns dsn without any password: the one in the URL's user
// information, and password or sslpassword parameters.
func redact(dsn string) string {
	if !isURL(dsn) {
		return keywordPassword.ReplaceAllString(dsn, "")
	}
	scheme, rest, _ := strings.Cut(dsn, "://")
	// The user information ends at the last '@' of the whole DSN: a
	// password may hold '@', '/', '?' or '#' unescaped, and redaction
	// must not depend on the DSN parsing well.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user := rest[:at]
		if colon := strings.Index(user, ":"); colon >= 0 {
			user = user[:colon]
		}
		if strings.ContainsAny(user, "/?#") {
			user = "…"
		}
		rest = user + rest[at:]
	}
	rest, query, hasQuery := strings.Cut(rest, "?")
	out := scheme + "://" + rest
	if !hasQuery {
		return out
	}
	var kept []string
	for _, p := range queryPairs(query) {
		if p.key != "password" && p.key != "sslpassword" {
			kept = append(kept, p.raw)
		}
	}
	if len(kept) > 0 {
		out += "?" + strings.Join(kept, "&")
	}
	return out
}

// dsnSecrets returns the passwords written in dsn, as written and unescaped,
// so that they can be scrubbed from messages that echo the DSN.
func dsnSecrets(dsn string) []string {
	var s []string
	add := func(v string) {
		if v == "" {
			return
		}
		s = append(s, v)
		if u, err := url.QueryUnescape(v); err == nil && u != v {
			s = append(s, u)
		}
		if u, err := url.PathUnescape(v); err == nil && u != v {
			s = append(s, u)
		}
	}
	if !isURL(dsn) {
		for _, m := range keywordPassword.FindAllStringSubmatch(dsn, -1) {
			add(strings.Trim(m[2], "'"))
		}
		return s
	}
	_, rest, _ := strings.Cut(dsn, "://")
	// Every reading of the user information that a parser might make:
	// from the first ':' to the last '@' of the whole DSN, and to every
	// '@' before it, so that whatever a half-successful parse echoes is
	// covered.
	if colon := strings.Index(rest, ":"); colon >= 0 {
		for i, c := range rest {
			if c == '@' && i > colon {
				add(rest[colon+1 : i])
			}
		}
	}
	_, query, _ := strings.Cut(rest, "?")
	for _, p := range queryPairs(query) {
		if p.key == "password" || p.key == "sslpassword" {
			_, raw, _ := strings.Cut(p.raw, "=")
			add(raw)
		}
	}
	return s
}
