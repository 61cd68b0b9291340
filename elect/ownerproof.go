package elect

import (
	"github.com/leaderrun/leaderrun/lease"

	"context"
	"slices"
)

// proveDead keeps the Prover's watch, for as long as watching lasts, on
// every partition that another member holds with a Where, as the view
// shows them, and stops the watches of partitions no longer held so (a
// watch that ends pokes the reconcile loop). Each member whose death a
// watch has proved is removed from the group (Store.Leave, within ctx),
// once: the view then leaves it out, and the partitions its death makes
// this owner's are seized by the next reconcile. It returns the watches
// whose proof is complete: their holder is dead and the partition's
// command tree gone.
func (o *Owner) proveDead(watching, ctx context.Context) map[int]*holderWatch {
	if o.Prover == nil {
		return nil
	}
	if o.watches == nil {
		o.watches, o.buried = map[int]*holderWatch{}, map[string]bool{}
	}
	g, _ := o.seen()
	proved := map[int]*holderWatch{}
	var dead []string
	for p := range o.Partitions {
		var rec lease.Record
		if p < len(g.Leases) {
			rec = g.Leases[p]
		}
		old := o.watches[p]
		if old == nil && (rec.Where == "" || !rec.Held() || rec.Holder == o.Member) {
			continue // nothing to watch, and no watch to stop
		}
		e := o.elector(p)
		w := e.watchHolder(watching, old, rec, e.logger())
		switch {
		case w == nil:
			delete(o.watches, p)
			continue
		case w != old:
			o.watches[p] = w
			go func() { <-w.done; o.poke() }()
		}
		if w.complete() && !w.ended && !w.spent {
			proved[p] = w
			if !slices.Contains(dead, w.rec.Holder) {
				dead = append(dead, w.rec.Holder)
			}
		}
	}
	live := g.Identities()
	for m := range o.buried {
		if !slices.Contains(live, m) {
			delete(o.buried, m)
		}
	}
	for _, m := range dead {
		if o.buried[m] || !slices.Contains(live, m) {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, o.RetryPeriod)
		start := o.clock()()
		err := o.Store.Leave(lctx, o.Group, m)
		cancel()
		o.observe("leave", o.clock()()-start, err)
		if err != nil {
			o.logger().Warn("cannot remove a member proved dead on this host from the group; will retry", "dead_member", m, "err", err)
			continue
		}
		o.buried[m] = true
		o.logger().Info("removed a member proved dead on this host from the group; its partitions move at once", "dead_member", m)
	}
	return proved
}

// stopWatches ends every watch of proveDead and waits for its Prove to
// return.
func (o *Owner) stopWatches() {
	for p, w := range o.watches {
		w.stop()
		delete(o.watches, p)
	}
}
