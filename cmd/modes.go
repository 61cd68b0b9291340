package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/lease"
)

// checkMode refuses (exit 125) to run name in one mode while replicas run
// it live in the other: a name runs one command (no --partitions) or one
// per partition (--partitions N), never both, or each mode's command would
// run beside the other's. A name held, or a group with live members, is
// live; what is left of an earlier use that has expired is not, and
// neither is what the store cannot tell now (the start goes on). Two
// replicas of different modes that start at the same moment can both
// pass: the check is for the mistake, not a lock.
func checkMode(ctx context.Context, store lease.Store, name string, partitioned bool) error {
	if partitioned {
		rec, err := store.Get(ctx, name)
		if err == nil && rec.Holder != "" && !rec.Released && rec.Remaining > 0 {
			return usagef("--name %s --partitions: %s holds the name without --partitions; a name runs either one command or one per partition, never both (stop those replicas, or use another --name)",
				name, shown(rec.Holder))
		}
		return nil
	}
	g, err := store.GetGroup(ctx, name)
	if err == nil && len(g.Members) > 0 {
		return usagef("--name %s: %d live replicas run it with --partitions %d; a name runs either one command or one per partition, never both (stop those replicas, or use another --name)",
			name, len(g.Members), g.Partitions)
	}
	return nil
}
