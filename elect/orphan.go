package elect

import (
	"github.com/leaderrun/leaderrun/lease"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// A lost reply is not a lost write: an Acquire whose reply did not come in
// time (a timeout, a dropped connection) may have been carried out by the
// store. Its caller then finds the name held by its own identity under a
// token it never learned: a tenure that nothing of its own runs under,
// which would keep every replica, itself included, waiting until it
// expires. Adopting it is not safe in general (the work was never started
// with its token, and the grant's send time, from which trust is measured,
// is unknown), so the caller releases it, with that record's token, and
// campaigns again at once.
//
// Only a caller with an Acquire or Seize of unknown outcome since its last
// grant does this: a record naming the caller's identity under another
// token may otherwise belong to another process that was given the same
// identity (or, with a fixed identity, to an earlier run that may still
// live), and releasing it would end that tenure behind its holder's back.

// lostGrant reports whether rec, read by holder while unsure whether its
// last Acquire was carried out, is that Acquire's grant: it names holder,
// is held, and its token is not known, the token of the last tenure
// holder started.
func lostGrant(rec lease.Record, holder string, unsure bool, known int64) bool {
	return unsure && rec.Holder == holder && rec.Held() && rec.Token != known
}

// releaseLostGrant releases the lost grant rec in store, with a timeout of
// retry, and returns nil when the name is free of it: released now, or
// lost meanwhile (expired, or taken over). Any other error is the store's.
func releaseLostGrant(ctx context.Context, store lease.Store, rec lease.Record, retry time.Duration, clock lease.Clock,
	observe func(string, time.Duration, error), log *slog.Logger) error {
	log.Warn("the store granted us the lease although the acquire's reply was lost; releasing that tenure, which nothing runs under, to campaign again",
		"lost_token", rec.Token, "expires_in", rec.Remaining.Round(time.Millisecond))
	rctx, cancel := context.WithTimeout(ctx, retry)
	defer cancel()
	sent := clock()
	err := store.Release(rctx, rec.Name, rec.Holder, rec.Token)
	observe("release", clock()-sent, err)
	switch {
	case err == nil:
		log.Info("released the lost grant", "lost_token", rec.Token)
		return nil
	case errors.Is(err, lease.ErrLost):
		log.Info("the lost grant ended before its release", "lost_token", rec.Token)
		return nil
	}
	return fmt.Errorf("release lost grant of lease %q (token %d): %w", rec.Name, rec.Token, err)
}

// unknownOutcome reports whether err, from an Acquire or a Seize, leaves
// open whether the store granted the name: any error but a refusal, a
// *HeldError or a closed store.
func unknownOutcome(err error) bool {
	var held *lease.HeldError
	return err != nil && !errors.As(err, &held) && !errors.Is(err, lease.ErrRefused) && !errors.Is(err, lease.ErrClosed)
}
