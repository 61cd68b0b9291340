package redis

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/internal/lazyre"
)

// DSN query parameters that leaderrun reads itself. They are removed before
// the DSN reaches go-redis, which refuses parameters it does not know.
const (
	paramPrefix       = "leaderrun_prefix"
	paramWaitReplicas = "leaderrun_wait_replicas"
)

// DefaultPrefix starts every key the store writes, and its wake-up
// channel, unless the DSN names another with leaderrun_prefix.
const DefaultPrefix = "leaderrun"

// options are leaderrun's own DSN parameters.
type options struct {
	prefix       string
	waitReplicas int
	// retriesSet reports that the DSN chose go-redis's max_retries.
	retriesSet bool
}

// A prefix may not contain glob characters (it starts a SCAN pattern) nor
// braces (hash tags).
var prefixPattern = lazyre.New(`^[A-Za-z0-9_.:-]{1,64}$`)

// errPercentEncode is the whole message for a DSN whose user information
// does not parse, so that nothing of the password is echoed.
var errPercentEncode = errors.New("malformed DSN: write it as redis://[user:password@]host:port/db, " +
	"with @, :, / and ? in the user name or password percent-encoded (%40, %3A, %2F, %3F)")

// splitDSN checks a redis:// or rediss:// DSN, takes leaderrun's own
// parameters out of it, and returns the rest for go-redis's ParseURL. It
// refuses a parameter given twice, an unknown leaderrun_ parameter, and a
// URL whose path shows that the password was not percent-encoded.
func splitDSN(dsn string) (string, options, error) {
	opts := options{prefix: DefaultPrefix}
	if !isURL(dsn) {
		return "", opts, errors.New("want a redis:// or rediss:// URL")
	}
	u, err := url.Parse(dsn)
	if err != nil || strings.ContainsAny(u.Path, "@:") || u.Opaque != "" {
		return "", opts, errPercentEncode
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", opts, fmt.Errorf("port %q: want 1 to 65535", p)
		}
	}
	seen := map[string]bool{}
	var kept []string
	for raw := range strings.SplitSeq(u.RawQuery, "&") {
		if raw == "" {
			continue
		}
		k, v, _ := strings.Cut(raw, "=")
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err := errors.Join(err1, err2); err != nil {
			return "", opts, fmt.Errorf("parameter %q: %w", k, err)
		}
		if seen[key] {
			return "", opts, fmt.Errorf("parameter %s given more than once", key)
		}
		seen[key] = true
		switch {
		case key == "max_retries":
			opts.retriesSet = true
		case !strings.HasPrefix(key, "leaderrun_"):
		case key == paramPrefix:
			if !prefixPattern.MatchString(value) {
				return "", opts, fmt.Errorf("%s=%q: want 1 to 64 letters, digits or . _ : -", paramPrefix, value)
			}
			opts.prefix = value
			continue
		case key == paramWaitReplicas:
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 || n > 100 {
				return "", opts, fmt.Errorf("%s=%q: want a number of replicas, 0 to 100", paramWaitReplicas, value)
			}
			opts.waitReplicas = n
			continue
		default:
			return "", opts, fmt.Errorf("unknown parameter %s (known: %s, %s)", key, paramPrefix, paramWaitReplicas)
		}
		kept = append(kept, raw)
	}
	u.RawQuery = strings.Join(kept, "&")
	return u.String(), opts, nil
}

func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "redis://") || strings.HasPrefix(dsn, "rediss://")
}

// redact returns dsn without its password, or only its scheme when it does
// not parse.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || !isURL(dsn) || strings.ContainsAny(u.Path, "@:") || u.Opaque != "" {
		scheme, _, _ := strings.Cut(dsn, ":")
		return scheme + "://…"
	}
	switch {
	case u.User == nil:
	case u.User.Username() == "":
		u.User = nil
	default:
		u.User = url.User(u.User.Username())
	}
	return u.String()
}

// dsnSecrets returns what may be the password in dsn, as written and
// unescaped, so that it can be scrubbed from messages: everything between
// the first ':' of the user information and the last '@' of the DSN, and
// the password as url.Parse reads it. The first guess is generous on
// purpose: over-scrubbing an error is harmless.
func dsnSecrets(dsn string) []string {
	var s []string
	add := func(v string) {
		if v == "" || slices.Contains(s, v) {
			return
		}
		s = append(s, v)
		if u, err := url.PathUnescape(v); err == nil && u != v {
			s = append(s, u)
		}
	}
	_, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return nil
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
			add(pw)
		}
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
	}
	return s
}
