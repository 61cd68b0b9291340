package sqlite

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
)

func init() {
	lease.RegisterStore(openDSN, "sqlite", "file")
}

// openDSN is the lease.Opener for the "sqlite" and "file" schemes.
func openDSN(ctx context.Context, dsn string, o lease.OpenOptions) (*Store, error) {
	path, opts, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	opts.Existing, opts.Logger = o.Existing, o.Logger
	return Open(ctx, path, opts)
}

// optAllowNetworkFS is the DSN spelling of Options.UnsafeAllowNetworkFS.
const optAllowNetworkFS = "unsafe_allow_network_fs"

// parseDSN splits a "sqlite:" or "file:" DSN into the database path and the
// options. A relative path stays relative; Open resolves it.
func parseDSN(dsn string) (string, Options, error) {
	var opts Options
	fail := func(format string, args ...any) (string, Options, error) {
		return "", Options{}, fmt.Errorf("sqlite store %q: %s: %w", dsn, fmt.Sprintf(format, args...), lease.ErrRefused)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return fail("%v", err)
	}
	if u.Scheme != "sqlite" && u.Scheme != "file" {
		return fail("scheme is not sqlite or file")
	}
	if u.User != nil || u.Host != "" {
		return fail("a host is not allowed; the store is a local file (write sqlite:///abs/path or sqlite:rel/path)")
	}
	if u.Fragment != "" || strings.HasSuffix(dsn, "#") {
		return fail("unexpected fragment; escape '#' in a path as %%23")
	}
	path := u.Path
	if u.Opaque != "" {
		// "sqlite:rel/path" keeps its path opaque and escaped.
		if path, err = url.PathUnescape(u.Opaque); err != nil {
			return fail("%v", err)
		}
	}
	if path == "" {
		return fail("empty path")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("%v", err)
	}
	for key, vals := range q {
		switch key {
		case optAllowNetworkFS:
			if len(vals) != 1 {
				return fail("option %s given %d times", key, len(vals))
			}
			v, err := strconv.ParseBool(vals[0])
			if err != nil {
				return fail("option %s=%q is not a boolean", key, vals[0])
			}
			opts.UnsafeAllowNetworkFS = v
		default:
			return fail("unknown option %q (known: %s)", key, optAllowNetworkFS)
		}
	}
	return path, opts, nil
}

// DefaultPath is the database file used when no store is named: the same
// path for every process of one user on a host, so that they elect among
// themselves. Only processes that share this file take part in one
// election; a container sees its own file unless the directory is a shared
// volume.
//
// For root it is /var/lib/leaderrun/leaderrun.db; for other users
// $XDG_STATE_HOME/leaderrun/leaderrun.db, where XDG_STATE_HOME defaults to
// ~/.local/state. Without a home directory it is
// $TMPDIR/leaderrun-<uid>/leaderrun.db.
func DefaultPath() string {
	const file = "leaderrun.db"
	if os.Geteuid() == 0 {
		return filepath.Join("/var/lib/leaderrun", file)
	}
	if dir := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "leaderrun", file)
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "state", "leaderrun", file)
	}
	return filepath.Join(os.TempDir(), "leaderrun-"+strconv.Itoa(os.Geteuid()), file)
}
