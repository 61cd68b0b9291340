package lease

import (
	"context"
	"time"
)

// Store persists leases. Every method is one atomic operation evaluated with
// the store's own clock; implementations never read, decide and then write
// in separate steps. Methods are safe for concurrent use.
//
// An operation whose outcome is unknown (a timeout, a dropped connection)
// must be reported as an error, never as success: the election loop treats
// any error from Renew as "not renewed".
//
// After Close, every method returns an error wrapping ErrClosed, and Waits
// in progress return ErrClosed promptly. The section "Writing a store" of
// the package documentation says what else a store must do; package
// leasetest checks it.
type Store interface {
	// Acquire grants name to holder for ttl if the name is free: never
	// acquired, released, or expired by the store's clock, and not kept
	// from holder by a step-down reservation (see RequestStepDown). The
	// returned record carries the new token, which is greater than every
	// token previously granted for name, also when the record was deleted
	// (token = max(previous+1, a wall clock in milliseconds: the server's
	// where a transaction can read one, else the acquiring replica's, as
	// on etcd; see the package documentation)); acquisition
	// clears the step-down flag, the reservation and Where. If the name is
	// not free for holder, Acquire returns a *HeldError describing it (see
	// Refusal), whose Record.Remaining is the time until it may be.
	// Acquire by the current holder while it holds the name also returns
	// *HeldError: a tenure is renewed, never re-acquired.
	//
	// An Acquire that is refused records holder as a candidate for name,
	// seen until the store's now + 2×ttl (lease.Seen); RequestStepDown
	// accepts only a live candidate as successor. (A store may record it
	// on every attempt, and may leave a candidate still seen for more
	// than ttl as it is: lease.Candidate.Fresh.)
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Record, error)

	// Seize is Acquire for a holder that has proved the current tenure
	// dead: it also grants name while the lease has not expired, provided
	// the record still names dead.Holder with dead.Token and is not
	// released. Reservations apply as in Acquire. A free name is granted
	// as by Acquire. Otherwise it returns a *HeldError, as Acquire does.
	// Only a caller that verified, on the holder's own host, that the
	// holder and everything it ran are gone may call it (see Where).
	Seize(ctx context.Context, name, holder string, dead Record, ttl time.Duration) (Record, error)

	// Renew extends holder's lease on name to ttl from the store's now, if
	// holder still holds it with token and it has not expired. Otherwise it
	// returns ErrLost. The token does not change. A renewal of a tenure
	// asked to step down succeeds and returns a record with StepDown set;
	// ending the tenure is the caller's decision. Renewals do not wake
	// waiters.
	Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (Record, error)

	// Annotate sets the record's Where, if holder still holds name with
	// token and it has not expired; otherwise it returns ErrLost. It wakes
	// waiters, so that a follower learns where the holder runs.
	Annotate(ctx context.Context, name, holder string, token int64, where string) error

	// Release marks name free if holder holds it with token, and wakes
	// followers blocked in Wait. It returns ErrLost if holder no longer
	// held it, also when the lease expired without anyone taking it over
	// (the name is not changed then). A step-down reservation outlives the
	// release.
	Release(ctx context.Context, name, holder string, token int64) error

	// RequestStepDown asks the current holder of name to hand it over:
	// it sets the record's StepDown flag, which the holder's next Renew
	// returns, and reserves the name for window from the store's now.
	// With a successor, only successor may acquire the name during the
	// window; without one, the current holder may not. After the window
	// anyone may. It wakes waiters, and returns the updated record.
	//
	// It changes nothing and returns ErrNotFound for a name never
	// acquired, ErrNotHeld for one released or expired, ErrAlreadyLeader
	// when successor holds the name, and ErrUnknownSuccessor when
	// successor is not a live candidate (see Acquire and StepDownRefusal).
	// For a partition key (see SplitPartitionKey), a live member of its
	// group is a live candidate too, though it never tried to acquire the
	// partition; a member that left or whose record expired is not. For
	// any other name, membership of a group plays no part.
	// It is one atomic operation: the checks, the successor's among them,
	// and the write cannot be separated by another holder's acquisition.
	RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (Record, error)

	// Get returns the record for name, or ErrNotFound.
	Get(ctx context.Context, name string) (Record, error)

	// List returns every record in the store, partitions' included,
	// ordered by name bytewise.
	List(ctx context.Context) ([]Record, error)

	// Wait blocks until name's record may differ from seen in who holds it
	// (see SameTenure: holder, token, released, step-down, Where, or
	// whether it exists; a zero seen means "absent"), until timeout has
	// passed, or until ctx ends, whichever is first. It returns nil in
	// the first two cases and ctx's error in the last. If the record
	// already differs from seen when Wait is called, it returns at once:
	// the caller passes what it last read, so that a change between that
	// read and the call is never missed. Spurious wake-ups are allowed;
	// renewals should not wake it. A store that cannot be notified polls a
	// cheap read.
	Wait(ctx context.Context, name string, seen Record, timeout time.Duration) error

	// Join makes member a live member of group until the store's now +
	// ttl, and returns the group. The first Join of a group records its
	// number of partitions; a Join with another number changes nothing and
	// returns a *PartitionsError (which wraps ErrRefused). Joining wakes
	// the group's waiters when it adds a member.
	Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (Group, error)

	// RenewMember is a member's renewal round, one atomic operation
	// whatever the number of claims: it extends member's record to ttl
	// (recreating it, and waking waiters, if it had expired or left), and
	// each claimed partition lease that member still holds with the
	// claim's token as Renew would, and returns the group as it is
	// afterwards. A claim whose lease member no longer holds is left as it
	// is; the caller learns that from the returned group (Group.Holds). A
	// partition lease that member holds and does not claim is left to
	// expire, or, by a store whose rounds renew a member's partitions
	// together (etcd's share the member's lease), released once a round
	// claimed it before. It returns ErrNotFound for a group never joined.
	RenewMember(ctx context.Context, group, member string, claims []Claim, ttl time.Duration) (Group, error)

	// Leave removes member from group and wakes the group's waiters. It
	// does not release member's partitions. Leaving a group one is not a
	// member of does nothing.
	Leave(ctx context.Context, group, member string) error

	// GetGroup returns group with its live members and every partition's
	// record, or ErrNotFound for a group never joined.
	GetGroup(ctx context.Context, group string) (Group, error)

	// WaitGroup is Wait for a whole group: it returns once the group's
	// live members, or the tenure (as for Wait) of any of its partitions,
	// may differ from seen (see SameGroup), or timeout has passed, and
	// ctx's error when ctx ends first. A member that expires without
	// leaving need not wake it. When it returns because it read the group
	// and found it differing from seen, it returns what it read, which
	// saves the caller a read of every partition; otherwise (a wake-up it
	// did not read after, a timeout, a group that does not exist) the
	// zero Group.
	WaitGroup(ctx context.Context, group string, seen Group, timeout time.Duration) (Group, error)

	// Campaigner: the candidates a store records with what each says of
	// itself, and the ends of a candidacy and of a name.
	Campaigner

	// Describe names the store for logs and status output. It never
	// contains a password.
	Describe() string

	// Close releases the store's resources and ends Waits in progress
	// (they return ErrClosed). It does not release leases. Calling it
	// more than once is safe.
	Close() error
}

// Credentialed is implemented by a store that takes credentials from
// environment variables (PostgreSQL's PGPASSWORD, a variable an etcd DSN
// names). leaderrun keeps those variables from its command, and blanks
// them in its own environment once the store is open.
type Credentialed interface {
	// CredentialEnv names the variables; they need not be set.
	CredentialEnv() []string
}
