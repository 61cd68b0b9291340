package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
)

// keepSecrets blanks the store's credentials in this process's environment
// now that the store has read them (see scrubCredentials).
func (r *Replica) keepSecrets(store lease.Store) {
	if err := ScrubCredentials(store); err != nil {
		r.log.Warn("cannot blank the store's credentials in /proc/self/environ", "err", err)
	}
}

// checkMode refuses to run this replica's name in this mode while replicas
// run it in the other (see checkMode), asking the store for a retry
// period at most.
func (r *Replica) checkMode(store lease.Store, partitioned bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RetryPeriod)
	defer cancel()
	return checkMode(ctx, store, r.cfg.Name, partitioned)
}

// openStore opens the store, retrying while it is merely unreachable. A
// store that refuses (bad DSN, credentials, privileges) ends the run; so
// does a stop signal (cleanly) and --acquire-timeout.
func (r *Replica) openStore() (lease.Store, error) {
	ctx, cancel := r.campaignContext()
	defer cancel()
	backoff := 250 * time.Millisecond
	var said unreachableLog
	for {
		store, err := lease.OpenWith(ctx, r.dsn, lease.OpenOptions{Logger: r.log})
		switch {
		case err == nil:
			r.keepSecrets(store)
			return store, nil
		case errors.Is(err, lease.ErrRefused) && r.byDefault:
			return nil, fmt.Errorf("open store: %w", DefaultStoreError(err))
		case errors.Is(err, lease.ErrRefused):
			return nil, fmt.Errorf("open store: %w", err)
		case ctx.Err() != nil:
			return nil, r.campaignError(ctx, err)
		}
		said.log(r.log, err, backoff, time.Now())
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, 5*time.Second)
		case <-ctx.Done():
			return nil, r.campaignError(ctx, ctx.Err())
		}
	}
}

// unreachableLog says how opening the store fails while it is retried:
// the first failure, and each that differs from the one before, at warn
// level; the same failure again at debug level, and at warn once a minute,
// with how long it has lasted. A host name in the DSN that has not
// resolved for that minute is said as such, with a hint to check the DSN:
// a misspelled host otherwise retries for ever with only the resolver's
// words. The zero value is ready to use.
type unreachableLog struct {
	last   string    // the last failure's text
	since  time.Time // when it was first seen
	warned time.Time // when it was last said at warn level
}

// repeatEvery is how often the same failure is said at warn level.
const repeatEvery = time.Minute

func (u *unreachableLog) log(log *slog.Logger, err error, retryIn time.Duration, now time.Time) {
	if msg := err.Error(); msg != u.last {
		u.last, u.since, u.warned = msg, now, now
		log.Warn("store unreachable; retrying", "err", err, "retry_in", retryIn)
		return
	}
	if now.Sub(u.warned) < repeatEvery {
		log.Debug("store unreachable; retrying", "err", err, "retry_in", retryIn)
		return
	}
	u.warned = now
	lasted := now.Sub(u.since).Round(time.Second)
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		log.Warn("the store's host name does not resolve; check the host in the DSN (retrying)",
			"host", dns.Name, "for", lasted, "err", err)
		return
	}
	log.Warn("store still unreachable; retrying", "for", lasted, "err", err, "retry_in", retryIn)
}

// campaignContext ends on a stop signal or after --acquire-timeout.
func (r *Replica) campaignContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-r.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	if r.cfg.AcquireTimeout <= 0 {
		return ctx, cancel
	}
	tctx, tcancel := context.WithTimeoutCause(ctx, r.cfg.AcquireTimeout, ErrAcquireTimeout)
	return tctx, func() { tcancel(); cancel() }
}

// campaignError explains why a campaign in ctx ended with err. A stop
// signal while standing by ends the run cleanly (context.Canceled, exit 0).
func (r *Replica) campaignError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), ErrAcquireTimeout):
		return fmt.Errorf("lease %q: %w (%v)", r.cfg.Name, ErrAcquireTimeout, r.cfg.AcquireTimeout)
	case r.stopped():
		r.log.Info("stopped while standing by")
		return context.Canceled
	}
	return err
}

// checkMode refuses (exit 125) to run name in one mode while replicas run
// it live in the other: a name runs one command (no --partitions) or one
// per partition (--partitions N), never both, or each mode's command would
// run beside the other's. A name held, or a group with live members, is
// live; what is left of an earlier use that has expired is not, and
// neither is what the store cannot tell now (the start goes on). Two
// replicas of different modes that start at the same moment can both
// pass: the check is for the mistake, not a lock.
func checkMode(ctx context.Context, store lease.Store, name string, partitioned bool) error {
	if partitioned {
		rec, err := store.Get(ctx, name)
		if err == nil && rec.Holder != "" && !rec.Released && rec.Remaining > 0 {
			return configErrorf("--name %s --partitions: %s holds the name without --partitions; a name runs either one command or one per partition, never both (stop those replicas, or use another --name)",
				name, observe.Shown(rec.Holder))
		}
		return nil
	}
	g, err := store.GetGroup(ctx, name)
	if err == nil && len(g.Members) > 0 {
		return configErrorf("--name %s: %d live replicas run it with --partitions %d; a name runs either one command or one per partition, never both (stop those replicas, or use another --name)",
			name, len(g.Members), g.Partitions)
	}
	return nil
}
