package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// reads is a fake store's wait: the i-th call of changed is the i-th
// wake-up, and running out of reads stands for the timeout.
type reads[T any] struct {
	key   string
	steps []read[T]
	calls int // how many reads changed made
}

type read[T any] struct {
	v   T
	err error
}

func (r *reads[T]) wait(ctx context.Context, key string, _ time.Duration, changed func(context.Context) (bool, error)) error {
	r.key = key
	for range r.steps {
		if moved, _ := changed(ctx); moved {
			return nil
		}
	}
	return nil
}

func (r *reads[T]) get(_ context.Context, _ string) (T, error) {
	s := r.steps[r.calls]
	r.calls++
	return s.v, s.err
}

var errFlaky = errors.New("connection reset")

func TestAwaitTenure(t *testing.T) {
	held := lease.Record{Name: "n", Holder: "a", Token: 1}
	renewed := held
	renewed.Remaining = time.Second // a renewal is no change of tenure
	taken := lease.Record{Name: "n", Holder: "b", Token: 2}
	tests := []struct {
		name  string
		seen  lease.Record
		steps []read[lease.Record]
		reads int // reads until Wait ended
	}{
		{"taken", held, []read[lease.Record]{{v: renewed}, {err: errFlaky}, {v: taken}, {v: held}}, 3},
		{"deleted", held, []read[lease.Record]{{err: lease.ErrNotFound}, {v: held}}, 1},
		{"still absent", lease.Record{}, []read[lease.Record]{{err: lease.ErrNotFound}, {err: lease.ErrNotFound}}, 2},
		{"created", lease.Record{}, []read[lease.Record]{{err: lease.ErrNotFound}, {v: held}}, 2},
		{"unchanged", held, []read[lease.Record]{{v: renewed}, {err: errFlaky}}, 2},
	}
	for _, tt := range tests {
		r := &reads[lease.Record]{steps: tt.steps}
		if err := lease.AwaitTenure(context.Background(), r.wait, r.get, "n", tt.seen, time.Minute); err != nil {
			t.Errorf("%s: AwaitTenure = %v, want nil", tt.name, err)
		}
		if got, want := r.calls, tt.reads; got != want {
			t.Errorf("%s: AwaitTenure read %d times, want %d", tt.name, got, want)
		}
		if got, want := r.key, "n"; got != want {
			t.Errorf("%s: AwaitTenure waited on %q, want %q", tt.name, got, want)
		}
	}
}

func TestAwaitGroup(t *testing.T) {
	one := lease.Group{Name: "g", Partitions: 2, Members: []lease.Member{{Identity: "a"}}, Leases: make([]lease.Record, 2)}
	two := one
	two.Members = []lease.Member{{Identity: "a"}, {Identity: "b"}}
	r := &reads[lease.Group]{steps: []read[lease.Group]{{v: one}, {err: errFlaky}, {v: two}, {v: one}}}
	got, err := lease.AwaitGroup(context.Background(), r.wait, r.get, "g", one, time.Minute)
	if err != nil || len(got.Members) != 2 {
		t.Errorf("AwaitGroup = %+v, %v, want the group with two members", got, err)
	}
	if r.calls != 3 || r.key != "g" {
		t.Errorf("AwaitGroup read %d times on %q, want 3 on %q", r.calls, r.key, "g")
	}

	r = &reads[lease.Group]{steps: []read[lease.Group]{{err: lease.ErrNotFound}, {v: one}}}
	got, err = lease.AwaitGroup(context.Background(), r.wait, r.get, "g", lease.Group{}, time.Minute)
	if err != nil || got.Name != "g" || r.calls != 2 {
		t.Errorf("AwaitGroup from absent = %+v, %v after %d reads, want the created group after 2", got, err, r.calls)
	}

	r = &reads[lease.Group]{steps: []read[lease.Group]{{v: one}}}
	got, err = lease.AwaitGroup(context.Background(), r.wait, r.get, "g", one, time.Minute)
	if err != nil || got.Name != "" {
		t.Errorf("AwaitGroup at timeout = %+v, %v, want the zero Group", got, err)
	}
}
