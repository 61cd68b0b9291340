package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// An Opener opens a store from a DSN whose scheme it registered for. It
// parses its own options from the DSN and rejects ones it does not know.
// Errors that no retry can fix (a malformed DSN, an unusable path) wrap
// ErrRefused; errors never contain a password.
type Opener func(ctx context.Context, dsn string) (Store, error)

var (
	registryMu sync.Mutex // guards openers
	openers    = map[string]Opener{}
)

// Register makes a store available under a DSN scheme ("sqlite",
// "postgres"). Store packages call it from init; registering a scheme twice
// panics.
func Register(scheme string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("lease: store scheme registered twice: " + scheme)
	}
	openers[scheme] = open
}

// Schemes lists the registered DSN schemes, sorted.
func Schemes() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	var s []string
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the store a DSN names, by its scheme: the text before the
// first ':'.
func Open(ctx context.Context, dsn string) (Store, error) {
	scheme, _, ok := strings.Cut(dsn, ":")
	registryMu.Lock()
	open := openers[scheme]
	registryMu.Unlock()
	switch {
	case !ok && strings.ContainsAny(dsn, "=@"):
		// Perhaps key=value pairs, with a password: never echo it.
		return nil, fmt.Errorf("store: no scheme: write SCHEME://… (known schemes: %s), or sqlite:PATH for an SQLite file: %w",
			strings.Join(Schemes(), ", "), ErrRefused)
	case !ok:
		return nil, fmt.Errorf("store %q: no scheme; for an SQLite file write sqlite:%s (known schemes: %s): %w",
			dsn, dsn, strings.Join(Schemes(), ", "), ErrRefused)
	case open == nil:
		return nil, fmt.Errorf("store %q: unknown scheme %q (known: %s): %w",
			redactScheme(dsn), scheme, strings.Join(Schemes(), ", "), ErrRefused)
	}
	return open(ctx, dsn)
}

// redactScheme shows only the scheme of a DSN we cannot parse, so that a
// malformed DSN's password never reaches a log.
func redactScheme(dsn string) string {
	scheme, _, _ := strings.Cut(dsn, ":")
	return scheme + ":…"
}
