package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/tcpdial"
	"github.com/leaderrun/leaderrun/lease"
)

func init() {
	lease.RegisterStore(func(ctx context.Context, dsn string, opts lease.OpenOptions) (*Store, error) {
		return open(ctx, dsn, opts.Existing)
	}, "postgres", "postgresql")
	lease.RegisterKeyValue("postgres")
}

// pollInterval is how often Wait re-reads a lease while it cannot be
// notified: with leaderrun_listen=off, and while the LISTEN connection is
// down.
const pollInterval = 500 * time.Millisecond

// lockTimeout is the sessions' lock_timeout unless the DSN sets one.
const lockTimeout = "1s"

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
	groups     string // quoted, schema-qualified
	members    string // quoted, schema-qualified
	channel    string // NOTIFY channel of the schema
	pool       *pool
	listener   *listener // nil with leaderrun_listen=off
	// once is the query mode of statements a Store sends about once in
	// its life (Release): unprepared, in one round trip, where pgx's
	// default would prepare them first in a round trip of their own. A
	// DSN's default_query_exec_mode=simple_protocol is kept.
	once pgx.QueryExecMode

	existing bool // opened with lease.OpenOptions.Existing: create nothing

	closeOnce sync.Once
	closed    chan struct{}
}

var _ lease.Store = (*Store)(nil)

// maxMessageBody bounds the body of a protocol message from the server,
// which pgx allocates once it has read the message's length: by default up
// to a gigabyte, for one reply of a broken or hostile server. No message
// of leaderrun's comes near this.
const maxMessageBody = 16 << 20

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
func Open(ctx context.Context, dsn string) (*Store, error) { return open(ctx, dsn, false) }

// open is Open; with existing, it creates nothing and fails with
// lease.ErrNoStore when the schema's objects do not exist.
func open(ctx context.Context, dsn string, existing bool) (*Store, error) {
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
		return fail(parseError(dsn, err))
	}
	if cfg.Password != "" {
		secrets = append(secrets, cfg.Password) // from PGPASSWORD or the passfile, too
	}
	cfg.DialFunc = tcpdial.New().DialContext
	cfg.MaxProtocolMessageBodyLen = maxMessageBody
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = defaultApplicationName
	}
	if cfg.RuntimeParams["lock_timeout"] == "" {
		// An acquire that waits for a child's fenced transaction gives up
		// after a second and says so (lease.ErrLocked), rather than
		// timing out as if the server were unreachable.
		cfg.RuntimeParams["lock_timeout"] = lockTimeout
	}
	if (!opts.listen || existing) && !opts.execModeSet {
		// Unprepared, in one round trip each: without LISTEN, for a
		// pooler that cannot keep prepared statements; opened existing,
		// for a command's few statements, where preparing each first
		// cost a round trip of its own on a backend just started.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	once := pgx.QueryExecModeExec
	if cfg.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol {
		once = pgx.QueryExecModeSimpleProtocol
	}
	s := &Store{
		describe:   redact(dsn),
		secrets:    secrets,
		schema:     opts.schema,
		table:      pgx.Identifier{opts.schema, tableName}.Sanitize(),
		candidates: pgx.Identifier{opts.schema, candidatesName}.Sanitize(),
		groups:     pgx.Identifier{opts.schema, groupsName}.Sanitize(),
		members:    pgx.Identifier{opts.schema, membersName}.Sanitize(),
		channel:    channelName(opts.schema),
		pool:       newPool(cfg),
		once:       once,
		closed:     make(chan struct{}),
		existing:   existing,
	}
	if opts.listen {
		lcfg := cfg.Copy()
		if lcfg.RuntimeParams["application_name"] == defaultApplicationName {
			lcfg.RuntimeParams["application_name"] = defaultApplicationName + " listen"
		}
		s.listener = newListener(lcfg, s.channel)
	}
	if existing {
		if err := s.requireSchema(ctx); err != nil {
			s.Close()
			return fail(err)
		}
	} else if err := s.ensureSchema(ctx); err != nil {
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
// Calls in flight fail; Waits return lease.ErrClosed. It does not release
// leases and is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.listener != nil {
			s.listener.Stop()
		}
		s.pool.close()
	})
	return nil
}

// wrap adds op as context to err; see wrapError.
func (s *Store) wrap(op string, err error) error {
	return wrapError(op, err, s.secrets)
}

// do runs fn on a pooled connection, failing at once if the store is
// closed. When fn finds leaderrun's schema, a table or the fence function
// missing (dropped behind its back, or by a restore), do creates them again
// and runs fn once more: tokens stay above every earlier one by the token
// rule's clock floor.
func (s *Store) do(ctx context.Context, fn func(*pgx.Conn) error) error {
	select {
	case <-s.closed:
		return lease.ErrClosed
	default:
	}
	err := s.pool.do(ctx, fn)
	if !missingObject(err) || s.existing {
		return err
	}
	if cerr := s.ensureSchema(ctx); cerr != nil {
		return fmt.Errorf("%w (and creating it again failed: %w)", err, cerr)
	}
	return s.pool.do(ctx, fn)
}

// errTTL is returned for a lease duration that is not positive.
var errTTL = errors.New("lease duration must be positive")

// CredentialEnv implements lease.Credentialed: the libpq variables that
// pgx reads and that carry a secret or point at one: the password
// (PGPASSWORD, PGPASSFILE, PGSERVICEFILE, which may hold one), the client
// key's passphrase (PGSSLPASSWORD) and the client key (PGSSLKEY).
func (s *Store) CredentialEnv() []string {
	return []string{"PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "PGSSLPASSWORD", "PGSSLKEY"}
}
