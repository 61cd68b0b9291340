// Package redistest points tests at a real Redis server, gives each test
// its own key prefix, and starts private servers for tests that restart or
// inspect one.
//
// The shared server is the URL in LEADERRUN_TEST_REDIS, by default the
// local one. When it cannot be reached, tests skip with a message naming
// that variable — except in CI (CI set), where they fail: CI must not pass
// by skipping.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// EnvURL names the variable that points the tests at a server.
const EnvURL = "LEADERRUN_TEST_REDIS"

// DefaultURL is the server tests use when EnvURL is unset.
const DefaultURL = "redis://127.0.0.1:6379/0"

var (
	reachOnce sync.Once
	reachErr  error
)

// URL returns the test server's URL, and an error that says how to point
// the tests at a server when it cannot be reached.
func URL() (string, error) {
	u := os.Getenv(EnvURL)
	if u == "" {
		u = DefaultURL
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := Client(u)
		if err == nil {
			err = c.Ping(ctx).Err()
			c.Close()
		}
		if err != nil {
			reachErr = fmt.Errorf("Redis for tests is unreachable (%v); set %s to the URL of a server to test against", err, EnvURL)
		}
	})
	return u, reachErr
}

// Require returns the test server's URL, or skips tb (fails it in CI).
func Require(tb testing.TB) string {
	tb.Helper()
	u, err := URL()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	return u
}

// Client is a plain go-redis client for serverURL, for tests' own commands.
func Client(serverURL string) (*goredis.Client, error) {
	opts, err := goredis.ParseURL(serverURL)
	if err != nil {
		return nil, err
	}
	return goredis.NewClient(opts), nil
}

// NewPrefix picks a key prefix no other test uses, deletes every key under
// it when tb ends, and returns the server URL that makes leaderrun use it.
func NewPrefix(tb testing.TB) (dsn, prefix string) {
	tb.Helper()
	return PrefixOn(tb, Require(tb))
}

// PrefixOn is NewPrefix on the server at serverURL.
func PrefixOn(tb testing.TB, serverURL string) (dsn, prefix string) {
	tb.Helper()
	prefix = RandomPrefix()
	tb.Cleanup(func() {
		if err := DeletePrefix(serverURL, prefix); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return WithParam(serverURL, "leaderrun_prefix", prefix), prefix
}

// RandomPrefix returns a key prefix no other test run uses.
func RandomPrefix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "lrtest_" + hex.EncodeToString(b)
}

// DeletePrefix deletes every key that starts with prefix + ":".
func DeletePrefix(serverURL, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Client(serverURL)
	if err != nil {
		return fmt.Errorf("delete prefix %s: %w", prefix, err)
	}
	defer c.Close()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("delete prefix %s: %w", prefix, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			return fmt.Errorf("delete prefix %s: %w", prefix, err)
		}
		keys = keys[n:]
	}
	return nil
}

// WithParam adds a query parameter to a URL.
func WithParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}

// ViaAddr rewrites a URL to connect to addr (host:port) instead of its own
// host.
func ViaAddr(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return "", fmt.Errorf("%s is not a redis:// URL; cannot rewrite its host", EnvURL)
	}
	u.Host = addr
	return u.String(), nil
}

// Addr returns the host:port of a URL's server.
func Addr(dsn string) (string, error) {
	opts, err := goredis.ParseURL(dsn)
	if err != nil {
		return "", err
	}
	if opts.Network != "tcp" {
		return "", fmt.Errorf("%s names a Unix socket; this test needs TCP", EnvURL)
	}
	return opts.Addr, nil
}
