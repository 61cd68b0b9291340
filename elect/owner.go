package elect

import (
	"github.com/leaderrun/leaderrun/lease"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Defaults of an Owner's reconciling.
const (
	DefaultReconcileInterval = 10 * time.Second
	DefaultReconcileTimeout  = 30 * time.Second
)

// Owner is one member of a group of partitions (see Target): it joins the
// group, keeps its member record and the leases of the partitions it holds
// alive with one renewal round per RetryPeriod, and reconciles what it holds
// with the target computed from the live members — every
// ReconcileInterval, and at once when the store reports a change (a member
// joined or left, a partition changed hands) or a member's record expires.
//
// Each partition it acquires is a Tenure of its own, with the guarantees
// of an Elector's: trust ends RenewDeadline after the send time of the last
// round that renewed it; a round that finds it lost ends it at once. A
// partition that leaves the target is handed off in order: its tenure's
// context ends with ErrHandedOff, the caller stops its work, and only the
// caller's Release hands the lease back; until then the rounds keep it
// renewed.
//
// Fill in the exported fields and call Run. Durations must satisfy
// 0 < RetryPeriod < RenewDeadline < LeaseDuration, as an Elector's.
type Owner struct {
	Store      lease.Store
	Group      string
	Partitions int
	Member     string

	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// ReconcileInterval is the longest the owner goes without comparing
	// what it holds with the target; zero means DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// ReconcileTimeout is how long a hand-off may stay pending (the
	// caller's work not yet stopped) before the owner takes itself out of
	// the group until it completes, so that the others stop assigning it
	// partitions; zero means DefaultReconcileTimeout.
	ReconcileTimeout time.Duration

	// Started is called, during a reconcile, with each partition's tenure
	// once it is acquired; for partitions seized from a member proved dead
	// (Prover), on goroutines of their own, several at once. The caller
	// starts the partition's work, and calls the tenure's Release (or
	// StepAside) once that work has
	// stopped: after the tenure's context ended (ErrLost, ErrDeadline,
	// ErrHandedOff, ErrSteppedDown), or when the work ended on its own.
	// It must not block.
	Started func(p int, t *Tenure)

	// Logger, Clock and Observe are as an Elector's; Observe also sees
	// "join", "renew" (a whole round) and "leave", and "reconcile" (not a
	// store call: the time one reconcile took, acquisitions included).
	Logger  *slog.Logger
	Clock   lease.Clock
	Observe func(op string, took time.Duration, err error)

	// Prover, when set, watches the partitions that other members hold on
	// this host (records with a Where, Tenure.Annotate), as an Elector's
	// Prover watches a single name's holder. Once it has proved such a
	// member dead and a partition's command tree gone, the owner removes
	// the member from the group (Store.Leave), and takes each of its
	// partitions that it is the heir of with Store.Seize, each only after
	// that partition's own proof, instead of at the lease's expiry.
	Prover Prover

	// Owned by the reconcile loop: the Prover's watch of each partition
	// another member holds, and the members proved dead whose Leave was
	// sent (until the view no longer shows them).
	watches map[int]*holderWatch
	buried  map[string]bool

	mu      sync.Mutex // guards the fields below
	held    map[int]*owned
	holdOff map[int]time.Time // partitions not to acquire before then
	// unsure holds the partitions whose last Acquire failed without an
	// answer: the store may have granted them (see lostGrant).
	unsure map[int]bool
	view   lease.Group   // the group as the store last told it
	viewN  uint64        // how many answers the view has taken
	out    bool          // left the group because a hand-off is stuck
	kick   chan struct{} // asks the reconcile loop to run now
	// inRound is full while a renewal round reads out and calls the
	// store (see goOut).
	inRound chan struct{}
}

// owned is a partition the owner holds.
type owned struct {
	t *Tenure
	// handedOff is when its hand-off began; zero while it is in the
	// target.
	handedOff time.Time
	// keepUntil: held for a step-down reservation (as successor or
	// fallback) until then, although another member is its target.
	keepUntil time.Time
}

// Validate reports the first field of o that cannot work.
func (o *Owner) Validate() error {
	e := o.elector(0)
	if err := e.Validate(); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	if err := lease.CheckJoin(o.Group, o.Partitions, o.Member); err != nil {
		return err
	}
	if o.Started == nil {
		return errors.New("owner: no Started")
	}
	return nil
}

// elector is the configuration partition p's tenures share.
func (o *Owner) elector(p int) *Elector {
	logger := o.logger()
	if o.Logger != nil {
		logger = logger.With("partition", p)
	}
	return &Elector{Store: o.Store, Name: lease.PartitionKey(o.Group, p), Holder: o.Member,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		Logger: logger, Clock: o.Clock, Observe: o.Observe, Prover: o.Prover}
}

// Held lists the partitions the owner holds now, handed off or not, in
// order.
func (o *Owner) Held() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ps []int
	for p := range o.held {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// View returns the group as the owner last read it.
func (o *Owner) View() lease.Group {
	g, _ := o.seen()
	return g
}

// seen returns the view and its number, for setView.
func (o *Owner) seen() (lease.Group, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.view, o.viewN
}

// HoldOff keeps the owner from acquiring partition p before until: the
// restart delay of a partition whose work ended on its own.
func (o *Owner) HoldOff(p int, until time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holdOff == nil {
		o.holdOff = map[int]time.Time{}
	}
	o.holdOff[p] = until
}

// Run joins the group and holds its share of partitions until ctx ends,
// then leaves: it deletes its member record first (the others recompute at
// once), hands off every partition, and returns nil once the caller has
// released them all. It returns an error wrapping ErrRefused when the
// store refuses to let it join before ever answering (a wrong partition
// count among them, also wrapping ErrPartitions).
func (o *Owner) Run(ctx context.Context) error {
	if err := o.Validate(); err != nil {
		return err
	}
	o.mu.Lock()
	o.held, o.kick, o.inRound = map[int]*owned{}, make(chan struct{}, 1), make(chan struct{}, 1)
	o.mu.Unlock()
	log := o.logger()
	_, n := o.seen()
	g, err := o.join(ctx)
	if err != nil {
		return err
	}
	o.setView(g, n)
	log.Info("joined the group", "members", len(g.Members), "partitions", o.Partitions)

	// Renewals go on until every partition has been handed off; changes
	// of the group matter only until the owner leaves.
	background, stop := context.WithCancel(context.Background())
	watching, unwatch := context.WithCancel(background)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); o.renewRounds(background) }()
	go func() { defer wg.Done(); o.waitChanges(watching) }()
	defer func() { stop(); wg.Wait() }()
	defer o.stopWatches()

	interval := orDefault(o.ReconcileInterval, DefaultReconcileInterval)
	for {
		start := o.clock()()
		next := o.reconcile(ctx, watching)
		o.observe("reconcile", o.clock()()-start, nil)
		wait := min(interval, time.Until(next))
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			unwatch()
			o.leave(log)
			return nil
		case <-o.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// join makes the owner a member, retrying while the store is unreachable.
func (o *Owner) join(ctx context.Context) (lease.Group, error) {
	backoff := o.RetryPeriod / 4
	for {
		start := o.clock()()
		jctx, cancel := context.WithTimeout(ctx, o.RetryPeriod)
		g, err := o.Store.Join(jctx, o.Group, o.Partitions, o.Member, o.LeaseDuration)
		cancel()
		o.observe("join", o.clock()()-start, err)
		switch {
		case err == nil:
			return g, nil
		case ctx.Err() != nil:
			return lease.Group{}, ctx.Err()
		case errors.Is(err, lease.ErrRefused): // the store's error names the group
			return lease.Group{}, err
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		o.logger().Warn("store unavailable; retrying", "err", err, "retry_in", sleep.Round(time.Millisecond))
		backoff = min(2*backoff, 2*o.RetryPeriod)
		if err := lease.Sleep(ctx, sleep); err != nil {
			return lease.Group{}, err
		}
	}
}

// renewRounds runs a renewal round every RetryPeriod, from the start of
// one to the start of the next, until ctx ends.
func (o *Owner) renewRounds(ctx context.Context) {
	clock := o.clock()
	next := clock()
	failing := false
	for {
		if err := lease.Sleep(ctx, next-clock()); err != nil {
			return
		}
		sent := clock()
		next = sent + o.RetryPeriod
		err := o.round(ctx, sent)
		switch {
		case err != nil && !failing:
			o.logger().Warn("renewal round failed; trust in every partition ends at the renew deadline unless one succeeds", "err", err)
			failing = true
		case err == nil && failing:
			o.logger().Info("renewal rounds succeed again")
			failing = false
		}
	}
}

// round renews the member record and every partition held, in one store
// call, and tells each partition's tenure what became of it.
func (o *Owner) round(ctx context.Context, sent time.Duration) error {
	o.inRound <- struct{}{}
	defer func() { <-o.inRound }()
	o.mu.Lock()
	claims := make([]lease.Claim, 0, len(o.held))
	tenures := map[int]*Tenure{}
	for p, h := range o.held {
		claims = append(claims, lease.Claim{Partition: p, Token: h.t.Token()})
		tenures[p] = h.t
	}
	out, n := o.out, o.viewN
	o.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, o.RetryPeriod)
	defer cancel()
	if out {
		// Out of the group: renew the partitions one by one, without
		// the member record that a round would recreate.
		for _, c := range claims {
			rec, err := o.Store.Renew(rctx, lease.PartitionKey(o.Group, c.Partition), o.Member, c.Token, o.LeaseDuration)
			if err == nil || errors.Is(err, lease.ErrLost) {
				tenures[c.Partition].report(sent, rec, err)
			}
		}
		return nil
	}
	g, err := o.Store.RenewMember(rctx, o.Group, o.Member, claims, o.LeaseDuration)
	if errors.Is(err, lease.ErrNotFound) { // the group's record was deleted: join again
		g, err = o.Store.Join(rctx, o.Group, o.Partitions, o.Member, o.LeaseDuration)
	}
	if err == nil && rctx.Err() != nil {
		err = rctx.Err() // answered after the round's timeout: not to be relied on
	}
	o.observe("renew", o.clock()()-sent, err)
	if err != nil {
		if errors.Is(err, lease.ErrLost) { // the store says every tenure is over
			for _, t := range tenures {
				t.report(sent, lease.Record{}, err)
			}
		}
		return err
	}
	for _, c := range claims {
		if g.Holds(c.Partition, o.Member, c.Token) {
			tenures[c.Partition].report(sent, g.Leases[c.Partition], nil)
		} else {
			tenures[c.Partition].report(sent, lease.Record{}, fmt.Errorf("partition %d: %w", c.Partition, lease.ErrLost))
		}
	}
	if changed := o.setView(g, n); changed {
		o.poke()
	}
	return nil
}

// waitChanges wakes the reconcile loop whenever the store reports a change
// of the group, until ctx ends.
func (o *Owner) waitChanges(ctx context.Context) {
	for ctx.Err() == nil {
		seen, n := o.seen()
		g, err := o.Store.WaitGroup(ctx, o.Group, seen, time.Minute)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			lease.Sleep(ctx, o.RetryPeriod)
			continue
		}
		if g.Name == "" {
			_, n = o.seen()
			g, err = o.Store.GetGroup(ctx, o.Group)
		}
		if err == nil {
			o.setView(g, n)
		}
		o.poke()
	}
}

// setView stores g, the store's answer to a request sent when the view
// had taken n answers, and reports whether its live members or any
// partition's tenure differ from the view before. An answer to a request
// sent before the view took its last answer may be older than the view,
// and is dropped: taking a round's answer that went back to a state the
// pending WaitGroup had already reported left the owner reconciling with
// it until the next round (a member that left counted as live, its
// released partitions as held). So the view only moves forward, and what
// a dropped answer knew that the view does not, the store still shows:
// the next WaitGroup, from the view, returns it at once.
func (o *Owner) setView(g lease.Group, n uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n != o.viewN {
		return false
	}
	changed := !lease.SameGroup(o.view, g)
	o.view = g
	o.viewN++
	return changed
}

func (o *Owner) poke() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// reconcile hands off what the owner holds outside its target and acquires
// the target's free partitions, and returns when it should look again
// (a member's or a wanted partition's expiry). With a Prover, it also
// watches, for as long as watching lasts, the partitions that other
// members hold on this host, removes a member proved dead from the group
// and seizes the partitions it wants whose old tree is proved gone.
func (o *Owner) reconcile(ctx, watching context.Context) (next time.Time) {
	proved := o.proveDead(watching, ctx)
	now := time.Now()
	next = now.Add(orDefault(o.ReconcileInterval, DefaultReconcileInterval))
	soon := func(d time.Duration) {
		if at := now.Add(d + rand.N(maxJitter)); d > 0 && at.Before(next) {
			next = at
		}
	}
	o.mu.Lock()
	g, out := o.view, o.out
	live := g.Identities()
	if out {
		live = slices.DeleteFunc(live, func(m string) bool { return m == o.Member })
	} else if !slices.Contains(live, o.Member) {
		live = append(live, o.Member)
	}
	for _, m := range g.Members {
		soon(m.Remaining)
	}
	target := Target(o.Group, o.Partitions, live)
	stuck := false
	for p, h := range o.held {
		switch {
		case !h.handedOff.IsZero():
			stuck = stuck || now.Sub(h.handedOff) > orDefault(o.ReconcileTimeout, DefaultReconcileTimeout)
		case !o.wants(p, target, live, g, h, now):
			h.handedOff = now
			if rec := g.Leases[p]; rec.StepDown && rec.Token == h.t.Token() {
				// An operator's request, seen here before a round.
				h.t.end(ErrSteppedDown)
				o.logger().Info("stepping down from partition", "partition", p, "to", heir(o.Group, p, target, live, rec),
					"token", h.t.Token())
				continue
			}
			h.t.end(ErrHandedOff)
			o.logger().Info("handing partition off", "partition", p, "to", target[p], "token", h.t.Token())
		}
	}
	var want []int
	var lost []lease.Record // grants whose replies were lost, to release first
	for p := range o.Partitions {
		if o.held[p] == nil && lostGrant(g.Leases[p], o.Member, o.unsure[p], 0) {
			rec := g.Leases[p]
			rec.Name = lease.PartitionKey(o.Group, p)
			lost = append(lost, rec)
			continue // acquired, if wanted, by the next reconcile
		}
		if o.held[p] != nil || !o.wants(p, target, live, g, nil, now) {
			continue
		}
		if until := o.holdOff[p]; now.Before(until) {
			soon(until.Sub(now))
			continue
		}
		if w := proved[p]; w != nil && g.Leases[p].Reserved == 0 && lease.SameTenure(w.rec, g.Leases[p]) {
			want = append(want, p) // seized below
			continue
		}
		if wait := g.Leases[p].Blocks(o.Member); wait > 0 {
			soon(wait)
			continue
		}
		want = append(want, p)
	}
	o.mu.Unlock()

	for _, rec := range lost {
		_, p, _ := lease.SplitPartitionKey(rec.Name)
		err := releaseLostGrant(ctx, o.Store, rec, o.RetryPeriod, o.clock(), o.observe, o.logger().With("partition", p))
		if err != nil {
			o.logger().Warn("cannot release a lost grant; will retry", "partition", p, "err", err)
			break
		}
		o.mu.Lock()
		delete(o.unsure, p)
		o.mu.Unlock()
		next = time.Now() // acquire it at once if it is wanted
	}
	// The partitions of a member proved dead are seized in parallel: they
	// come many at once, and each waits only for its own proof.
	var seizes sync.WaitGroup
	for _, p := range want {
		if ctx.Err() != nil {
			break
		}
		if w := proved[p]; w != nil {
			seizes.Go(func() {
				if err := o.acquire(ctx, p, target[p] != o.Member, g.Leases[p], w); err != nil {
					o.logger().Warn("cannot seize partition; will retry", "partition", p, "err", err)
				}
			})
			continue
		}
		if err := o.acquire(ctx, p, target[p] != o.Member, g.Leases[p], nil); err != nil {
			o.logger().Warn("cannot acquire partition; will retry", "partition", p, "err", err)
			break // the store is in trouble: the next reconcile tries again
		}
	}
	seizes.Wait()
	o.checkOut(stuck)
	return next
}

// wants reports whether the owner should hold partition p: it is its
// target, unless a step-down reservation keeps it out, or a reservation
// makes it the successor or the fallback of p's target owner. h is the
// owner's hold of p, if any.
func (o *Owner) wants(p int, target, live []string, g lease.Group, h *owned, now time.Time) bool {
	if h != nil && now.Before(h.keepUntil) {
		return true
	}
	return heir(o.Group, p, target, live, g.Leases[p]) == o.Member
}

// heir is who should take partition p, whose record is rec, next: the
// successor a step-down named, else the fallback of a target owner that
// stepped down, else the target owner.
func heir(group string, p int, target, live []string, rec lease.Record) string {
	switch {
	case rec.Reserved > 0 && rec.Successor != "":
		return rec.Successor
	case rec.Reserved > 0 && rec.Excluded == target[p]:
		return Fallback(group, p, live, target[p])
	}
	return target[p]
}

// acquire takes partition p and starts its tenure. A partition taken for
// a reservation (not the owner's target) is kept until the reservation
// ends. With dead, the Prover's complete proof that seen's holder is dead
// and its tree gone, it takes p with Store.Seize instead (seen must be
// dead's tenure); a refused Seize spends the proof.
func (o *Owner) acquire(ctx context.Context, p int, reserved bool, seen lease.Record, dead *holderWatch) error {
	e := o.elector(p)
	sent := o.clock()()
	actx, cancel := context.WithTimeout(ctx, o.RetryPeriod)
	var rec lease.Record
	var err error
	op := "acquire"
	if dead != nil && lease.SameTenure(dead.rec, seen) {
		op = "seize"
		rec, err = o.Store.Seize(actx, e.Name, o.Member, dead.rec, o.LeaseDuration)
	} else {
		dead = nil
		rec, err = o.Store.Acquire(actx, e.Name, o.Member, o.LeaseDuration)
	}
	cancel()
	o.observe(op, o.clock()()-sent, err)
	o.mu.Lock()
	if o.unsure == nil {
		o.unsure = map[int]bool{}
	}
	if unknownOutcome(err) {
		o.unsure[p] = true
	} else if err == nil {
		delete(o.unsure, p)
	}
	o.mu.Unlock()
	var held *lease.HeldError
	switch {
	case errors.As(err, &held) && dead != nil:
		dead.spent = true
		e.logger().Info("the member that held the partition on this host is dead, but the store refused the takeover; waiting as usual",
			"dead_member", dead.rec.Holder, "err", err)
		return nil
	case errors.As(err, &held):
		return nil // taken meanwhile, or not yet free: a later reconcile sees it
	case err != nil:
		return err
	}
	t := e.newTenure(rec, sent, true)
	t.seized = dead != nil
	h := &owned{t: t}
	if reserved {
		h.keepUntil = time.Now().Add(seen.Reserved)
	}
	t.over = func() {
		o.mu.Lock()
		if o.held[p] == h {
			delete(o.held, p)
		}
		o.mu.Unlock()
		o.poke()
	}
	o.mu.Lock()
	o.held[p] = h
	o.mu.Unlock()
	if dead != nil {
		e.logger().Info("took over the partition from a dead member on this host", "token", rec.Token,
			"dead_member", dead.rec.Holder, "dead_token", dead.rec.Token)
	} else {
		e.logger().Info("acquired partition", "token", rec.Token)
	}
	o.Started(p, t)
	return nil
}

// checkOut takes the owner out of the group while a hand-off is stuck
// (the others then stop assigning it partitions), and back in once none
// is.
func (o *Owner) checkOut(stuck bool) {
	o.mu.Lock()
	out := o.out
	o.mu.Unlock()
	switch {
	case stuck && !out:
		o.logger().Warn("a hand-off is stuck past the reconcile timeout; leaving the group until it completes",
			"timeout", orDefault(o.ReconcileTimeout, DefaultReconcileTimeout))
		o.goOut()
	case !stuck && out && len(o.Held()) == 0:
		ctx, cancel := context.WithTimeout(context.Background(), o.RetryPeriod)
		defer cancel()
		_, n := o.seen()
		g, err := o.Store.Join(ctx, o.Group, o.Partitions, o.Member, o.LeaseDuration)
		if err == nil {
			o.setOut(false)
			o.setView(g, n)
			o.logger().Info("joined the group again")
			o.poke()
		}
	}
}

func (o *Owner) setOut(out bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.out = out
}

// goOut takes the owner out of the group: later rounds renew its
// partitions one by one, and its member record is deleted once the round
// in flight, if any, has returned. A round that the store saw after the
// delete would make the owner a member again: the others would then keep
// its share for it, unowned, until its record expired. If the delete
// fails, the record expires, as no round renews it.
func (o *Owner) goOut() {
	o.inRound <- struct{}{}
	o.setOut(true)
	<-o.inRound
	ctx, cancel := context.WithTimeout(context.Background(), o.RetryPeriod)
	defer cancel()
	start := o.clock()()
	err := o.Store.Leave(ctx, o.Group, o.Member)
	o.observe("leave", o.clock()()-start, err)
	if err != nil {
		o.logger().Warn("could not leave the group; the others see it expire", "err", err)
	}
}

// leave deletes the member record, hands off every partition, and waits
// until the caller released them all; renewal rounds go on meanwhile.
func (o *Owner) leave(log *slog.Logger) {
	o.goOut()
	o.mu.Lock()
	for p, h := range o.held {
		if h.handedOff.IsZero() {
			h.handedOff = time.Now()
			h.t.end(ErrHandedOff)
			log.Info("handing partition off: leaving", "partition", p, "token", h.t.Token())
		}
	}
	o.mu.Unlock()
	for len(o.Held()) > 0 {
		<-o.kick
	}
	log.Info("left the group")
}

func (o *Owner) clock() lease.Clock {
	if o.Clock != nil {
		return o.Clock
	}
	return lease.BootClock
}

func (o *Owner) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (o *Owner) observe(op string, took time.Duration, err error) {
	if o.Observe != nil {
		o.Observe(op, took, err)
	}
}
