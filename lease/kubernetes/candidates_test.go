package kubernetes

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leaderrun/leaderrun/lease"
)

// oldEdit rewrites name's state annotation as leaderrun 8cae9b5 did, which
// knew no candidacy annotation: it decoded the state (its candidates a map
// identity → seen until, µs), changed it, and updated the Lease it read,
// leaving the other annotations as they were.
func oldEdit(t *testing.T, c kubernetes.Interface, ns, name string, edit func(candidates map[string]int64)) {
	t.Helper()
	ctx := testCtx(t)
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, leaseName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]json.RawMessage
	if err := json.Unmarshal([]byte(l.Annotations[annState]), &state); err != nil {
		t.Fatal(err)
	}
	var cands map[string]int64
	if raw, ok := state["candidates"]; ok {
		if err := json.Unmarshal(raw, &cands); err != nil {
			t.Fatal(err)
		}
	}
	if cands == nil {
		cands = map[string]int64{}
	}
	edit(cands)
	state["candidates"], _ = json.Marshal(cands)
	b, _ := json.Marshal(state)
	l.Annotations[annState] = string(b)
	if _, err := c.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestOldLeaderrunCandidates: a leaderrun that knows no candidacy
// annotation keeps working beside this one: a candidate it records reads
// as the zero Candidacy, its rewrite of the state keeps what a campaigner
// said, and what a candidate it dropped had said is dropped at the next
// write here.
func TestOldLeaderrunCandidates(t *testing.T) {
	srv, c := admin(t)
	ns := namespace(t)
	s := mustOpen(t, srv, adminToken(), ns)
	ctx := testCtx(t)
	const ttl = 10 * time.Second
	rec, err := s.Acquire(ctx, "n", "h", ttl)
	if err != nil {
		t.Fatal(err)
	}
	said := lease.Candidacy{Priority: -2, Preempt: true, Note: "d\u00e9j\u00e0 \"vu\"\n"}
	for _, who := range []string{"a", "dropped"} {
		if err := s.Campaign(ctx, "n", who, said, ttl); err != nil {
			t.Fatal(err)
		}
	}
	seenUntil := time.Now().Add(time.Hour).UnixMicro() // the server's clock is the local one here
	oldEdit(t, c, ns, "n", func(cands map[string]int64) {
		cands["old"] = seenUntil
		delete(cands, "dropped")
	})
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Holder != "a" || got[1].Holder != "old" {
		t.Fatalf("Candidates = %+v, want a and old", got)
	}
	if got[0].Candidacy != said {
		t.Errorf("a reads %+v after an old rewrite, want %+v", got[0].Candidacy, said)
	}
	if got[1].Candidacy != (lease.Candidacy{}) {
		t.Errorf("old reads %+v, want the zero Candidacy", got[1].Candidacy)
	}
	// A refusal here keeps what a said and drops what dropped had said.
	var held *lease.HeldError
	if _, err := s.Acquire(ctx, "n", "a", ttl); !errors.As(err, &held) {
		t.Fatalf("Acquire of a held name: %v, want a *lease.HeldError", err)
	}
	if err := s.Campaign(ctx, "n", "dropped", lease.Candidacy{}, ttl); err != nil {
		t.Fatal(err)
	}
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, leaseName("n"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ann map[string]candidacy
	if err := json.Unmarshal([]byte(l.Annotations[annCandidacy]), &ann); err != nil {
		t.Fatalf("annotation %s: %v", annCandidacy, err)
	}
	if _, ok := ann["dropped"]; ok || len(ann) != 1 {
		t.Errorf("annotation %s = %v, want a's alone", annCandidacy, ann)
	}
	if err := s.Release(ctx, "n", "h", rec.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "n", "old", ttl); err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
}
