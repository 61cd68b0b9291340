package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// Acquire grants name to holder for ttl when its record is absent, released
// or expired by the server's clock and no step-down reservation keeps
// holder out, in one script, and publishes name on the wake-up channel.
// Otherwise the same script records holder as a candidate, seen until now
// + 2×ttl with what it said when it campaigned kept, and Acquire returns a *lease.HeldError built from the record it
// read. The new token is max(last token + 1, server clock in
// milliseconds); the last token lives in a key of its own that never
// expires. A script whose outcome is unknown returns an error.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "acquire", name, holder, lease.Record{}, ttl)
}

// Seize is Acquire that also takes the name over from the tenure dead while
// the record still names it, expired or not.
func (s *Store) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "seize", name, holder, dead, ttl)
}

func (s *Store) grant(ctx context.Context, op, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	op = fmt.Sprintf("%s lease %q", op, name)
	if ttl <= 0 {
		return lease.Record{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	reply, err := s.run(ctx, s.scripts.acquire, true,
		[]string{s.keys.lease(name), s.keys.token(name), s.keys.cand(name), s.keys.cattr(name)},
		name, holder, ttl.Microseconds(), dead.Holder, dead.Token, s.channel)
	if err != nil {
		return lease.Record{}, s.wrap(op, err)
	}
	granted, rec, found, err := decodeResult(reply)
	switch {
	case err != nil:
		return lease.Record{}, s.wrap(op, err)
	case granted:
		return rec, nil
	case !found:
		return lease.Record{}, fmt.Errorf("%s: refused without a record", op)
	}
	if refusal := lease.Refusal(rec, holder, &dead); refusal != nil {
		return lease.Record{}, refusal
	}
	// The script and Refusal judge by the same clock reading; they cannot
	// disagree unless the script is wrong.
	return lease.Record{}, fmt.Errorf("%s: refused a record that lets %s in: %+v", op, holder, rec)
}

// Renew extends the lease to ttl from the server's now if holder still
// holds name with token and it has not expired; otherwise it returns
// lease.ErrLost. It publishes nothing. A script whose outcome is unknown
// returns an error, never the record.
func (s *Store) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	op := fmt.Sprintf("renew lease %q", name)
	if ttl <= 0 {
		return lease.Record{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	reply, err := s.run(ctx, s.scripts.renew, true, []string{s.keys.lease(name)}, holder, token, ttl.Microseconds())
	if err != nil {
		return lease.Record{}, s.wrap(op, err)
	}
	renewed, rec, _, err := decodeResult(reply)
	switch {
	case err != nil:
		return lease.Record{}, s.wrap(op, err)
	case !renewed:
		return lease.Record{}, lease.ErrLost
	}
	return rec, nil
}

// Annotate sets the record's Where if holder holds name with token and it
// has not expired, and publishes name, in one script.
func (s *Store) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	return s.ifHeld(ctx, "annotate", s.scripts.annotate, name, holder, token, where, s.channel)
}

// Release marks name released if holder holds it with token and it has not
// expired, and publishes name, in one script. Otherwise it returns
// lease.ErrLost and changes nothing.
func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	return s.ifHeld(ctx, "release", s.scripts.release, name, holder, token, s.channel)
}

// ifHeld runs a script that changes name's record only if holder holds it
// with token, and returns lease.ErrLost if it did not.
func (s *Store) ifHeld(ctx context.Context, op string, script *goredis.Script, name, holder string, token int64, args ...any) error {
	op = fmt.Sprintf("%s lease %q", op, name)
	reply, err := s.run(ctx, script, false, []string{s.keys.lease(name)}, append([]any{holder, token}, args...)...)
	if err != nil {
		return s.wrap(op, err)
	}
	done, _, _, err := decodeResult(reply)
	switch {
	case err != nil:
		return s.wrap(op, err)
	case !done:
		return lease.ErrLost
	}
	return nil
}

// RequestStepDown sets the step-down flag and the reservation in one script
// guarded by "held, not by successor, and successor a live candidate or,
// for a partition, a live member of its group", and publishes name. When
// it changes nothing, the record the same script read says why.
func (s *Store) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	op := fmt.Sprintf("step down lease %q", name)
	if window <= 0 {
		return lease.Record{}, fmt.Errorf("%s: window must be positive", op)
	}
	keys := []string{s.keys.lease(name), s.keys.cand(name)}
	if group, _, ok := lease.SplitPartitionKey(name); ok {
		keys = append(keys, s.keys.members(group)) // the same hash slot
	}
	reply, err := s.run(ctx, s.scripts.stepDown, false, keys, successor, window.Microseconds(), s.channel)
	if err != nil {
		return lease.Record{}, s.wrap(op, err)
	}
	asked, rec, found, err := decodeResult(reply)
	switch {
	case err != nil:
		return lease.Record{}, s.wrap(op, err)
	case !asked:
		return lease.Record{}, fmt.Errorf("%s: %w", op, lease.StepDownRefusal(rec, found, successor))
	}
	return rec, nil
}

// Get returns name's record, or lease.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	recs, err := s.getMany(ctx, []string{s.keys.lease(name)})
	switch {
	case err != nil:
		return lease.Record{}, s.wrap(fmt.Sprintf("get lease %q", name), err)
	case !recs[0].Exists():
		return lease.Record{}, lease.ErrNotFound
	}
	return recs[0], nil
}

// listBatch is how many records List reads per script.
const listBatch = 500

// List returns every record under the store's prefix, ordered by name
// bytewise. It finds them with SCAN and reads them in batches, each batch
// one script; it is not one snapshot of the whole store.
func (s *Store) List(ctx context.Context) ([]lease.Record, error) {
	select {
	case <-s.closed:
		return nil, lease.ErrClosed
	default:
	}
	var (
		recs  []lease.Record
		batch []string
	)
	flush := func() error {
		got, err := s.getMany(ctx, batch)
		for _, rec := range got {
			if rec.Exists() {
				recs = append(recs, rec)
			}
		}
		batch = batch[:0]
		return err
	}
	iter := s.client.Scan(ctx, 0, s.keys.leasePattern(), listBatch).Iterator()
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == listBatch {
			if err := flush(); err != nil {
				return nil, s.wrap("list leases", err)
			}
		}
	}
	if err := errors.Join(iter.Err(), flush()); err != nil {
		return nil, s.wrap("list leases", err)
	}
	slices.SortFunc(recs, func(a, b lease.Record) int { return strings.Compare(a.Name, b.Name) })
	// SCAN may return a key twice.
	return slices.CompactFunc(recs, func(a, b lease.Record) bool { return a.Name == b.Name }), nil
}

// getMany reads the records at keys in one script, one per key: the zero
// Record for a key that holds none.
func (s *Store) getMany(ctx context.Context, keys []string) ([]lease.Record, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	reply, err := s.run(ctx, s.scripts.get, false, keys)
	if err != nil {
		return nil, err
	}
	if len(reply) != len(keys)+1 {
		return nil, fmt.Errorf("get: %d replies for %d keys", len(reply), len(keys))
	}
	now, err := replyInt(reply[0])
	if err != nil {
		return nil, err
	}
	recs := make([]lease.Record, len(keys))
	for i, v := range reply[1:] {
		if recs[i], _, err = decodeRecord(v, now); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// decodeResult decodes a record script's reply {status, now, record or
// null}: ok reports status 1, found that the reply carries a record.
func decodeResult(reply []any) (ok bool, rec lease.Record, found bool, err error) {
	if len(reply) != 3 {
		return false, lease.Record{}, false, fmt.Errorf("unexpected reply %v", reply)
	}
	status, err := replyInt(reply[0])
	if err != nil {
		return false, lease.Record{}, false, err
	}
	now, err := replyInt(reply[1])
	if err != nil {
		return false, lease.Record{}, false, err
	}
	rec, found, err = decodeRecord(reply[2], now)
	return status == 1, rec, found, err
}

// recordFields is the number of fields of a record in a reply, in
// common.lua's FIELDS order.
const recordFields = 12

// decodeRecord decodes a record as common.lua's fields replies it, with
// Remaining and Reserved measured from now (µs, the server's clock).
func decodeRecord(v any, now int64) (lease.Record, bool, error) {
	if v == nil {
		return lease.Record{}, false, nil
	}
	f, ok := v.([]any)
	if !ok || len(f) != recordFields {
		return lease.Record{}, false, fmt.Errorf("unexpected record %v", v)
	}
	str := make([]string, len(f))
	for i, x := range f {
		if str[i], ok = x.(string); !ok {
			return lease.Record{}, false, fmt.Errorf("unexpected record field %v", x)
		}
	}
	var n [5]int64 // token, acq, ren, exp, resv
	for i, field := range []string{str[2], str[3], str[4], str[5], str[10]} {
		var err error
		if n[i], err = strconv.ParseInt(field, 10, 64); err != nil {
			return lease.Record{}, false, fmt.Errorf("record field %q: %w", field, err)
		}
	}
	rec := lease.Record{
		Name:      str[0],
		Holder:    str[1],
		Token:     n[0],
		Acquired:  time.UnixMicro(n[1]),
		Renewed:   time.UnixMicro(n[2]),
		Expires:   time.UnixMicro(n[3]),
		Remaining: time.Duration(n[3]-now) * time.Microsecond,
		Released:  str[6] == "1",
		StepDown:  str[7] == "1",
		Successor: str[8],
		Excluded:  str[9],
		Where:     str[11],
	}
	if n[4] > 0 {
		rec.Reserved = time.Duration(n[4]-now) * time.Microsecond
	}
	return rec, true, nil
}

// replyInt reads an integer that a script replied as a number or a
// decimal string.
func replyInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("unexpected reply %v, want an integer", v)
}
