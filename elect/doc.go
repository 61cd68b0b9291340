// Package elect elects one holder per name through a lease.Store and keeps
// its tenure honest: the election engine, apart from the store contract in
// package lease.
//
// What is guaranteed: at most one holder trusts a tenure of a name at a time,
// provided the store keeps acknowledged writes, clocks advance at a bounded
// rate, the store's clock is not stepped by more than the safety margin, and
// the holder's process is not frozen for longer than that margin. Tokens
// strictly increase across tenures, releases and deleted records.
//
// What is not guaranteed: anything when those assumptions fail. A process
// frozen past its deadline (SIGSTOP, a paused VM) can still act for a moment
// after another holder was elected. The only defence that holds then is
// fencing: whatever the tenure writes to must carry the tenure's token and
// refuse tokens lower than one it has seen.
//
// Which clock is trusted: the store's clock decides expiry. The holder's
// local trust ends RenewDeadline after the moment it *sent* its last
// successful acquire or renew, measured with CLOCK_BOOTTIME, which keeps
// counting while the host is suspended. Because the store executes a
// statement after it was sent, that local deadline is never later than the
// store's expiry. docs/design.md in the repository explains the model.
//
// # Names and groups
//
// An Elector campaigns for one name; its Tenure renews it. An Owner joins a
// group of N partitions, each a lease named lease.PartitionKey(group, p),
// and holds the partitions that Target assigns it among the group's live
// members; each is a Tenure of its own, with the same guarantees.
//
// # Faster than the lease
//
// A follower cannot tell a dead holder from a slow one, so a crashed
// holder's name is free at its lease's expiry. An Elector with a Prover
// does better where it can prove the holder dead: a holder annotates its
// record with where it runs (Tenure.Annotate, lease.Record.Where), and
// Campaign, while it waits for a held name, asks the Prover to prove that
// holder dead; once it has, Campaign takes the name at once with
// Store.Seize, which succeeds only while the record still names the dead
// holder and token. Package samehost proves it for holders on the same
// host. A Tenure learns of a step-down request from the store's wake-up
// (Store.Wait), not only at its next renewal.
package elect
