package observe

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leaderrun/leaderrun/lease"
)

// The views of the store's records that leaderrun shows: status --json,
// GET /partitions, and the quoting of what a store holds in text.

// RecordView is the stable JSON shape of a lease for scripts (status --json).
type RecordView struct {
	Name     string     `json:"name"`
	State    string     `json:"state"` // held, released or expired
	Holder   string     `json:"holder"`
	Token    int64      `json:"token"`
	Acquired *time.Time `json:"acquired"`
	Renewed  *time.Time `json:"renewed"`
	Expires  *time.Time `json:"expires"`
	// ExpiresIn is the time left in seconds as the store measured it; 0
	// once released or expired.
	ExpiresIn float64 `json:"expires_in_seconds"`
}

// ViewRecord is r as RecordView shows it.
func ViewRecord(r lease.Record) RecordView {
	return RecordView{
		Name: r.Name, State: r.State(), Holder: r.Holder, Token: r.Token,
		Acquired: optTime(r.Acquired), Renewed: optTime(r.Renewed), Expires: optTime(r.Expires),
		ExpiresIn: seconds(TimeLeft(r)),
	}
}

// GroupView is the stable JSON shape of a name run with --partitions.
type GroupView struct {
	Name       string          `json:"name"`
	Partitions int             `json:"partitions"`
	Members    []MemberView    `json:"members"`
	Leases     []PartitionView `json:"leases"` // one per partition, in order
}

// MemberView is a live member of a group in GroupView.
type MemberView struct {
	Identity  string  `json:"identity"`
	Owns      int     `json:"owns"` // partitions it holds
	ExpiresIn float64 `json:"expires_in_seconds"`
}

// PartitionView is a partition's lease in GroupView.
type PartitionView struct {
	Partition int `json:"partition"`
	RecordView
}

// ViewGroup is g as GroupView shows it.
func ViewGroup(g lease.Group) GroupView {
	out := GroupView{Name: g.Name, Partitions: g.Partitions, Members: []MemberView{}, Leases: []PartitionView{}}
	owns := map[string]int{}
	for p, r := range g.Leases {
		if r.Name == "" {
			r.Name = lease.PartitionKey(g.Name, p)
		}
		out.Leases = append(out.Leases, PartitionView{Partition: p, RecordView: ViewRecord(r)})
		if r.Held() {
			owns[r.Holder]++
		}
	}
	for _, m := range g.Members {
		out.Members = append(out.Members, MemberView{Identity: m.Identity, Owns: owns[m.Identity],
			ExpiresIn: seconds(m.Remaining)})
	}
	return out
}

// TimeLeft is how long r's lease has left, to the millisecond; 0 unless
// it is held.
func TimeLeft(r lease.Record) time.Duration {
	if !r.Held() {
		return 0
	}
	return r.Remaining.Round(time.Millisecond)
}

// seconds is d in seconds to the millisecond, as JSON shows it: 13.399,
// never 13.399000000000001.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Round(time.Millisecond)
	return &t
}

// Shown is s as an operator command prints it in text: as it is when it is
// printable UTF-8 without spaces, else quoted, so that what a store holds
// (a tampered record, say) can neither forge a line nor move the terminal.
func Shown(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// PartitionsView is the body of GET /partitions.
type PartitionsView struct {
	GroupView
	Self  string `json:"self"`  // this replica's identity
	Owned []int  `json:"owned"` // the partitions it holds
}
