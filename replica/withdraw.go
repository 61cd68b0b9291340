package replica

import (
	"context"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// withdrawTimeout bounds the withdrawal of a stopping replica's
// candidacies: a store that does not answer by then forgets them on its
// own, twice the TTL after the replica last campaigned.
const withdrawTimeout = 2 * time.Second

// withdraw ends this replica's candidacy for each of names, now that it
// campaigns no more (lease.Campaigner.Withdraw): a stop signal while it
// stood by or after its tenure's release, --once, --acquire-timeout.
// Without it, the store would count the replica as a candidate for twice
// its TTL, and a step-down would hand the name to nobody. A crashed
// replica cannot withdraw; it counts until then.
func (r *Replica) withdraw(store lease.Store, names ...string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), withdrawTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := store.Withdraw(ctx, name, r.holder); err != nil {
				r.log.Warn("could not withdraw the candidacy; a step-down counts this replica as a candidate until it lapses",
					"lease", name, "lapses_within", 2*r.cfg.LeaseDuration, "err", err)
				return
			}
			r.log.Debug("withdrew the candidacy", "lease", name)
		}()
	}
	wg.Wait()
}

// withdrawPartitions withdraws this replica's candidacies for the
// partitions it last held (their records still name it, released): the
// ones a store may have recorded it for. A partition it only tried to take
// while another held it is left to lapse; its group membership, which a
// partition's step-down counts, ended when it left the group.
func (pr *partitioned) withdrawPartitions(store lease.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), withdrawTimeout)
	g, err := store.GetGroup(ctx, pr.cfg.Name)
	cancel()
	if err != nil {
		pr.log.Warn("could not read the partitions to withdraw from; a step-down may count this replica as a candidate until it lapses",
			"lapses_within", 2*pr.cfg.LeaseDuration, "err", err)
		return
	}
	var names []string
	for p, rec := range g.Leases {
		if rec.Holder == pr.holder {
			names = append(names, lease.PartitionKey(pr.cfg.Name, p))
		}
	}
	pr.withdraw(store, names...)
}
