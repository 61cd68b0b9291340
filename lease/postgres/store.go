package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

func init() {
	open := func(ctx context.Context, dsn string) (lease.Store, error) {
		s, err := Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	lease.Register("postgres", open)
	lease.Register("postgresql", open)
}

// pollInterval is how often Wait re-reads a lease while it cannot be
// notified: with leaderrun_listen=off, and while the LISTEN connection is
// down.
const pollInterval = 500 * time.Millisecond

// defaultApplicationName is the application_name of leaderrun's sessions
// unless the DSN sets one.
const defaultApplicationName = "leaderrun"

// Store is a lease.Store in a PostgreSQL table. Every operation is one
// statement in its own READ COMMITTED transaction, timed by the database's
// clock. Its methods are safe for concurrent use.
type Store struct {
	describe   string
	secrets    []string // scrubbed from every error's text
	schema     string
	table      string // quoted, schema-qualified
	candidates string // quoted, schema-qualified
	channel    string // NOTIFY channel of the schema
	pool       *pool
	listener   *listener // nil with leaderrun_listen=off

	closeOnce sync.Once
	closed    chan struct{}

	mu   sync.Mutex             // guards seen
	seen map[string]observation // the last state of each name this Store read
}

var _ lease.Store = (*Store)(nil)

// observation is what a statement saw of a name, and what the listener had
// delivered before the statement was sent. Wait compares against it.
type observation struct {
	mark listenState
	row  rowState
}

// rowState is the part of a record that changes when a name changes hands;
// a renewal does not change it.
type rowState struct {
	exists   bool
	holder   string
	token    int64
	released bool
	stepDown bool
}

func stateOf(rec lease.Record) rowState {
	return rowState{exists: true, holder: rec.Holder, token: rec.Token, released: rec.Released, stepDown: rec.StepDown}
}

// Open connects to the PostgreSQL server that dsn names and creates the
// lease schema, table and fence function unless they exist.
//
// dsn is anything pgx.ParseConfig accepts (a postgres:// URL, with several
// hosts and target_session_attrs if wanted, or keyword/value pairs; PG*
// environment variables and the passfile fill in what it omits), plus
// leaderrun's own URL query parameters:
//
//   - leaderrun_schema=NAME puts the lease table in schema NAME (default
//     "leaderrun").
//   - leaderrun_listen=off turns LISTEN/NOTIFY off, for PgBouncer in
//     transaction mode: Wait polls every 500 ms instead. It also makes pgx
//     use the exec query mode (no named prepared statements) unless the DSN
//     sets default_query_exec_mode.
//
// A malformed DSN, a refused login, an unknown database, a missing
// privilege and a read-only server are errors that wrap lease.ErrRefused;
// an unreachable server is a plain error, which a retry may fix. No error
// contains the password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	secrets := dsnSecrets(dsn)
	fail := func(err error) (*Store, error) {
		return nil, wrapError("open postgres store "+redact(dsn), err, secrets)
	}
	pgxDSN, opts, err := splitDSN(dsn)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", err, lease.ErrRefused))
	}
	cfg, err := pgx.ParseConfig(pgxDSN)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", err, lease.ErrRefused))
	}
	if cfg.Password != "" {
		secrets = append(secrets, cfg.Password) // from PGPASSWORD or the passfile, too
	}
	cfg.DialFunc = newDialer().DialContext
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = defaultApplicationName
	}
	if !opts.listen && !opts.execModeSet {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	s := &Store{
		describe:   redact(dsn),
		secrets:    secrets,
		schema:     opts.schema,
		table:      pgx.Identifier{opts.schema, tableName}.Sanitize(),
		candidates: pgx.Identifier{opts.schema, candidatesName}.Sanitize(),
		channel:    channelName(opts.schema),
		pool:       newPool(cfg),
		closed:     make(chan struct{}),
		seen:       map[string]observation{},
	}
	if opts.listen {
		lcfg := cfg.Copy()
		if lcfg.RuntimeParams["application_name"] == defaultApplicationName {
			lcfg.RuntimeParams["application_name"] = defaultApplicationName + " listen"
		}
		s.listener = newListener(lcfg, s.channel)
	}
	if err := s.ensureSchema(ctx); err != nil {
		s.Close()
		return fail(err)
	}
	return s, nil
}

// channelName is the NOTIFY channel for schema: "leaderrun.SCHEMA", or a
// hash of the schema when that would exceed PostgreSQL's 63-byte names.
func channelName(schema string) string {
	if c := "leaderrun." + schema; len(c) <= 63 {
		return c
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("leaderrun.%016x", h.Sum64())
}

// Describe returns the DSN without its password.
func (s *Store) Describe() string { return s.describe }

// Close stops the LISTEN connection and closes the store's connections.
// Calls in flight fail; Wait returns an error. It does not release leases
// and is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.listener != nil {
			s.listener.stop()
		}
		s.pool.close()
	})
	return nil
}

// wrap adds op as context to err; see wrapError.
func (s *Store) wrap(op string, err error) error {
	return wrapError(op, err, s.secrets)
}

// do runs fn on a pooled connection, failing at once if the store is closed.
func (s *Store) do(ctx context.Context, fn func(*pgx.Conn) error) error {
	select {
	case <-s.closed:
		return errClosed
	default:
	}
	return s.pool.do(ctx, fn)
}

// mark returns what the listener had delivered for name so far; its zero
// value (not up) when there is no listener or it has not connected.
func (s *Store) mark(name string) listenState {
	if s.listener == nil {
		return listenState{}
	}
	return s.listener.current(name)
}

func (s *Store) observe(name string, mark listenState, row rowState) {
	mark.changed = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[name] = observation{mark: mark, row: row}
}

func (s *Store) observed(name string) (observation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.seen[name]
	return o, ok
}

// errTTL is returned for a lease duration that is not positive.
var errTTL = errors.New("lease duration must be positive")
