package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Campaigner = (*Store)(nil)

// Campaign records holder as a candidate for name, seen until the
// server's now + 2×ttl, and what it says of itself in the sorted set of
// the name's attributes beside the candidates (nothing for the zero
// Candidacy), in one script (lease.Campaign). A leaderrun that does not
// know that set keeps working: its refusals extend the candidate alone,
// and its candidates read as the zero Candidacy. Campaign runs only the
// commands an ACL user of an earlier ACLRules may run.
func (s *Store) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	op := fmt.Sprintf("campaign for lease %q", name)
	switch {
	case lease.CheckIdentity(holder) != nil:
		return fmt.Errorf("%s: %w", op, lease.CheckIdentity(holder))
	case ttl <= 0:
		return fmt.Errorf("%s: %w", op, errTTL)
	case len(c.Note) > lease.MaxNote:
		return fmt.Errorf("%s: note of %d bytes, more than %d", op, len(c.Note), lease.MaxNote)
	}
	preempt := "0"
	if c.Preempt {
		preempt = "1"
	}
	_, err := s.run(ctx, s.scripts.campaign, false, []string{s.keys.cand(name), s.keys.cattr(name)},
		holder, ttl.Microseconds(), c.Priority, preempt, c.Ineligible.Microseconds(), c.Note)
	return s.wrap(op, err)
}

// Candidates returns name's live candidates by the server's clock, ordered
// by holder, in one script.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	op := fmt.Sprintf("candidates of lease %q", name)
	reply, err := s.run(ctx, s.scripts.candidates, false, []string{s.keys.cand(name), s.keys.cattr(name)})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	list, err := decodeCandidates(reply)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return list, nil
}

// decodeCandidates decodes the candidates script's reply {now, then per
// candidate: holder, seen until, attributes or null}.
func decodeCandidates(reply []any) ([]lease.Standing, error) {
	if len(reply)%3 != 1 {
		return nil, fmt.Errorf("unexpected reply %v", reply)
	}
	now, err := replyInt(reply[0])
	if err != nil {
		return nil, err
	}
	at := time.UnixMicro(now)
	var out []lease.Standing
	for i := 1; i < len(reply); i += 3 {
		holder, ok := reply[i].(string)
		if !ok {
			return nil, fmt.Errorf("unexpected candidate %v", reply[i])
		}
		until, err := replyInt(reply[i+1])
		if err != nil {
			return nil, err
		}
		c := lease.Candidate{Holder: holder, SeenUntil: time.UnixMicro(until)}
		if attrs, ok := reply[i+2].(string); ok {
			decodeAttrs(&c, attrs)
		}
		out = append(out, c.Standing(at))
	}
	slices.SortFunc(out, func(a, b lease.Standing) int { return strings.Compare(a.Holder, b.Holder) })
	return out, nil
}

// decodeAttrs sets c's attributes from v, "PRIORITY PREEMPT
// INELIGIBLE_UNTIL NOTE" as campaign.lua writes it (INELIGIBLE_UNTIL in
// µs by the server's clock, 0 for none). Attributes it cannot
// read (written by a later version in another form) leave c as it is:
// the zero Candidacy, as for a leaderrun that says nothing.
func decodeAttrs(c *lease.Candidate, v string) {
	f := strings.SplitN(v, " ", 4)
	if len(f) != 4 {
		return
	}
	priority, err1 := strconv.ParseInt(f[0], 10, 32)
	until, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || (f[1] != "0" && f[1] != "1") {
		return
	}
	c.Priority, c.Preempt, c.Note = int32(priority), f[1] == "1", f[3]
	if until > 0 {
		c.IneligibleUntil = time.UnixMicro(until)
	}
}

// Withdraw removes holder's candidacy for name and what it said, in one
// script.
func (s *Store) Withdraw(ctx context.Context, name, holder string) error {
	_, err := s.run(ctx, s.scripts.withdraw, false, []string{s.keys.cand(name), s.keys.cattr(name)}, holder)
	return s.wrap(fmt.Sprintf("withdraw from lease %q", name), err)
}

// Forget deletes name's record, its last token, its candidates and their
// attributes in one script (with DEL, which ACLRules allows since
// Forget exists), when the record is neither held by the
// server's clock nor has a token at or ahead of that clock in
// milliseconds (lease.Forgettable: the last token, which a grant counts
// from, included), and publishes name. Otherwise it changes nothing and
// returns a *lease.HeldError or lease.ErrTokenAhead; lease.ErrNotFound
// when there is no record.
func (s *Store) Forget(ctx context.Context, name string) error {
	op := fmt.Sprintf("forget lease %q", name)
	reply, err := s.run(ctx, s.scripts.forget, false,
		[]string{s.keys.lease(name), s.keys.token(name), s.keys.cand(name), s.keys.cattr(name)}, s.channel)
	if err != nil {
		return s.wrap(op, err)
	}
	_, rec, found, err := decodeResult(reply)
	if err != nil {
		return s.wrap(op, err)
	}
	status, _ := replyInt(reply[0])
	switch {
	case status == 1:
		return nil
	case status == 2:
		return lease.ErrTokenAhead
	case !found:
		return lease.ErrNotFound
	}
	return &lease.HeldError{Record: rec}
}
