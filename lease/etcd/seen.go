package etcd

import (
	"encoding/json"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// seen remembers what this handle last learned of each name's keys — from
// a read, from its own writes, or from the events of a Wait's watch — and
// at which revision.
//
// It is a hint for Acquire, whose transaction compares the record's and
// the lease key's revisions: a stale hint costs one more attempt (the
// transaction then returns the keys as they are), never a wrong grant. For
// Renew it is a confirmation only while a watch of the name is in place
// and has read the keys (live > 0): the watch reports every change after
// that read, so the state lags etcd by the watch's delivery delay only,
// as a read sent alongside the keep-alive would.
type seen struct {
	mu    sync.Mutex // guards names
	names map[string]*seenName
}

type seenName struct {
	st  nameState
	rev int64 // the revision st is as of
	// live counts the watches of the name that are in place, have read
	// the keys and apply their events here.
	live int
	// unknown marks a state that an event made unknown (a record that
	// does not decode) until the next read.
	unknown bool
}

// get returns what was last learned of name, if anything, and the
// revision it is as of: exactly the name's keys at that revision (less the
// candidates, which are as last read).
func (s *seen) get(name string) (nameState, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.names[name]
	if !ok || n.unknown {
		return nameState{}, 0, false
	}
	return n.st, n.rev, true
}

// confirmed returns the state of name while a live watch keeps it current.
func (s *seen) confirmed(name string) (nameState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.names[name]
	if !ok || n.live == 0 || n.unknown {
		return nameState{}, false
	}
	return n.st, true
}

func (s *seen) entry(name string) *seenName {
	if s.names == nil {
		s.names = map[string]*seenName{}
	}
	n, ok := s.names[name]
	if !ok {
		n = &seenName{}
		s.names[name] = n
	}
	return n
}

// read records st, the name's keys as read at rev, unless something later
// was learned already. Candidates are not watched: a read's replace them.
func (s *seen) read(name string, st nameState, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.entry(name)
	if rev >= n.rev {
		n.st, n.rev, n.unknown = st, rev, false
	}
}

// forget makes what is known of name unknown until the next read (after
// a write whose effect on the other keys the handle did not see).
func (s *seen) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.names[name]; ok {
		n.unknown = true
	}
}

// watching counts a live watch of name in (delta 1) or out (-1).
func (s *seen) watching(name string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.entry(name)
	n.live += delta
}

// apply applies a watch's events for k's keys, in order. An event older
// than what is known is skipped; one of the same revision is applied again
// (a transaction's events share a revision, and applying one twice
// changes nothing).
func (s *seen) apply(k nameKeys, events []*clientv3.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.entry(k.name)
	for _, ev := range events {
		rev := ev.Kv.ModRevision
		if rev < n.rev {
			continue
		}
		put := ev.Type == clientv3.EventTypePut
		switch string(ev.Kv.Key) {
		case k.record:
			var rec recordValue
			if put && json.Unmarshal(ev.Kv.Value, &rec) != nil {
				// Not ours to understand: nothing relies on it until
				// the next read.
				n.unknown, n.rev = true, rev
				continue
			}
			n.st.rec, n.st.found, n.st.recRev = rec, put, 0
			if put {
				n.st.recRev = rev
			}
		case k.lease:
			n.st.leaseKV = nil
			if put {
				n.st.leaseKV = ev.Kv
			}
		case k.released:
			n.st.releasedToken = ""
			if put {
				n.st.releasedToken = string(ev.Kv.Value)
			}
		default:
			continue
		}
		n.st.finish()
		n.rev = rev
	}
}
