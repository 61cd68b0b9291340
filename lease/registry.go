package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/leaderrun/leaderrun/internal/lazyre"
)

// OpenOptions tune Open.
type OpenOptions struct {
	// Existing opens a store that must exist already, for an operator's
	// command (status, watch, step-down): the store creates no file,
	// directory, schema or table, and fails with an error wrapping
	// ErrNoStore when there is none to open.
	Existing bool
	// Logger receives what a store works around and the operator should
	// know (the SQLite store's wake directory that it does not use, and
	// why). Nil discards it.
	Logger *slog.Logger
}

// ErrNoStore is returned by Open with OpenOptions.Existing when the DSN
// names no store (a missing file, a schema that does not exist).
var ErrNoStore = errors.New("no leaderrun store there")

// An Opener opens a store from a DSN whose scheme it registered for. It
// parses its own options from the DSN and rejects ones it does not know.
// Errors that no retry can fix (a malformed DSN, an unusable path) wrap
// ErrRefused; errors never contain a password.
type Opener func(ctx context.Context, dsn string, opts OpenOptions) (Store, error)

var (
	registryMu sync.Mutex // guards openers and keyValue
	openers    = map[string]Opener{}
	keyValue   string            // the scheme whose opener takes keyword=value DSNs
	leftOut    map[string]string // scheme → the build tag that left its store out
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

// RegisterStore registers open under each scheme, as Register does, for a
// store package whose opener returns its own type. An error returns a nil
// Store, never a Store holding a nil pointer.
func RegisterStore[S Store](open func(ctx context.Context, dsn string, opts OpenOptions) (S, error), schemes ...string) {
	opener := func(ctx context.Context, dsn string, opts OpenOptions) (Store, error) {
		s, err := open(ctx, dsn, opts)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	for _, scheme := range schemes {
		Register(scheme, opener)
	}
}

// RegisterLeftOut records that this build leaves out the store of schemes
// because it was built with tag (noetcd, nokubernetes), so that Open of
// such a DSN says how to get it.
func RegisterLeftOut(tag string, schemes ...string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if leftOut == nil {
		leftOut = map[string]string{}
	}
	for _, scheme := range schemes {
		leftOut[scheme] = tag
	}
}

// RegisterKeyValue routes DSNs written as keyword=value pairs without a
// scheme ("host=db dbname=app", as libpq takes them) to the opener of
// scheme, which must be registered too.
func RegisterKeyValue(scheme string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if keyValue != "" {
		panic("lease: keyword=value DSNs registered twice: " + scheme)
	}
	keyValue = scheme
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

var (
	// schemeRE is a URI scheme (RFC 3986), of a sensible length.
	schemeRE = lazyre.New(`^[A-Za-z][A-Za-z0-9+.-]{0,31}$`)
	// keyValueRE is the start of a keyword=value DSN.
	keyValueRE = lazyre.New(`^\s*[A-Za-z_]+\s*=`)
)

// Sketch returns what a log line may show of dsn before its store has
// parsed it: the scheme of a store leaderrun knows and, for a URL, its host
// (for sqlite:, the path); never a user, a password or the query, which
// may hold one. It returns "" for a DSN that names no known store.
func Sketch(dsn string) string {
	name, rest, open, kv := storeFor(dsn)
	switch {
	case open == nil:
		return ""
	case kv:
		return name + " (keyword=value DSN)"
	case name == "sqlite":
		path, _, _ := strings.Cut(strings.TrimPrefix(rest, "//"), "?")
		return "sqlite:" + path
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return name
	}
	return name + "://" + u.Host
}

// storeFor returns the scheme of dsn (the text before the first ':') and
// what follows it, and the opener of the store it names: the one
// registered for that scheme, or, for a keyword=value DSN (kv), the one
// registered for those, whose scheme name then is. open is nil when no
// store is.
func storeFor(dsn string) (name, rest string, open Opener, kv bool) {
	name, rest, _ = strings.Cut(dsn, ":")
	registryMu.Lock()
	defer registryMu.Unlock()
	if kv = keyValueRE.MatchString(dsn) && keyValue != ""; kv {
		name = keyValue
	}
	return name, rest, openers[name], kv
}

// Open opens the store a DSN names, by its scheme: the text before the
// first ':'. DSNs of keyword=value pairs go to the store that registered
// for them (RegisterKeyValue).
func Open(ctx context.Context, dsn string) (Store, error) {
	return OpenWith(ctx, dsn, OpenOptions{})
}

// OpenWith is Open with options.
//
// A DSN that names no store leaderrun knows is never echoed in the error,
// because it may be a password (a --store-file holding the wrong line) or
// hold one: only a well-formed scheme followed by "//" is.
func OpenWith(ctx context.Context, dsn string, opts OpenOptions) (Store, error) {
	scheme, rest, open, _ := storeFor(dsn)
	registryMu.Lock()
	tag := leftOut[scheme]
	registryMu.Unlock()
	switch {
	case open != nil:
		return open(ctx, dsn, opts)
	case !strings.HasPrefix(rest, "//") || !schemeRE.MatchString(scheme):
		// Only a scheme followed by "//" is surely one: "hunter2:x" may
		// be a password.
		return nil, fmt.Errorf("store: the DSN has no scheme leaderrun knows (it is not shown: it may hold a password); "+
			"write sqlite:PATH for an SQLite file, or SCHEME://… with a scheme of %s: %w",
			strings.Join(Schemes(), ", "), ErrRefused)
	case tag != "":
		return nil, fmt.Errorf("store: unknown scheme %q: this build leaves it out (-tags %s); build without that tag (known: %s): %w",
			scheme, tag, strings.Join(Schemes(), ", "), ErrRefused)
	default:
		return nil, fmt.Errorf("store: unknown scheme %q (known: %s): %w",
			scheme, strings.Join(Schemes(), ", "), ErrRefused)
	}
}
