// Package lease is the contract between leaderrun and the stores that keep
// its leases: the Store interface, the Record and Group it returns, the
// errors callers branch on, the registry of DSN schemes, and the helpers
// every store would otherwise write again. Package elect campaigns and
// keeps tenures on top of it; a store author reads this package alone.
//
// Which clock is trusted: the store's clock decides expiry. A record's
// Remaining is the time left as the store measured it; a follower sleeps
// on it, because it does not depend on the local wall clock. Tokens
// strictly increase for a name across tenures, releases and deleted
// records (the token rule below); they are what fencing rests on.
//
// # Writing a store
//
// A store only persists; the election's policy lives here. A new store
// must:
//
//   - register its DSN scheme from init (Register), parse its own options,
//     and wrap errors that no retry can fix (malformed DSN, refused login,
//     missing privilege) with Refused; errors never contain a password.
//   - make every method one atomic operation on the store's own clock: a
//     conditional write (compare-and-swap) or one transaction, never a read
//     and a separate write. Acquire's condition is "absent, released or
//     expired, and not reserved against the caller"; Renew's, Annotate's
//     and Release's is "this holder, this token, not released, not
//     expired".
//   - apply the lease rules, which model.go writes once as pure functions
//     of the record read and the store's now (Grant, Renew, Annotate,
//     Release, StepDown, the token rule NextToken, candidates with Seen
//     and LiveSuccessor, groups with JoinPartitions, KeepMember and
//     LiveMembers): a store that reads and then compares-and-swaps calls
//     them in between; one that decides in a single statement or script
//     writes them there, and the model-based test checks it against them.
//   - keep the token rule: token = max(previous + 1, wall clock in
//     milliseconds), so tokens grow even when a record is deleted or a
//     backup restored; a token lives beside the record, never only in
//     something that expires. The clock is the server's where a
//     transaction can read one (PostgreSQL, MySQL, Redis); SQLite uses the
//     host's and etcd, which has none, the acquiring replica's, which the
//     store's documentation must say.
//   - build refusals with Refusal (Acquire and Seize) and StepDownRefusal
//     (RequestStepDown) from the record read after the write changed
//     nothing, and report every unknown outcome as an error.
//   - wake waiters on every change of hands (acquire, seize, release,
//     step-down request, Annotate, Join that adds a member, Leave) without
//     blind polling, and make Wait and WaitGroup compare with the seen state
//     the caller passes (SameTenure, SameGroup), reading the current state
//     only after the wake-up channel is in place, so that no change between
//     the caller's read and its Wait is lost.
//   - keep a group's partition leases as ordinary leases named by
//     PartitionKey, so that Acquire, Release and RequestStepDown work on
//     them unchanged; wake the group's waiters when one changes hands.
//   - end Waits promptly with ErrClosed on Close.
//
// Package leasetest has the conformance suite (leasetest.Run) that checks
// all of this against a real server, the model-based test
// (leasetest.RunModel) that applies random sequences of operations and
// clock steps to the store and to the rules and requires the same results
// and records (give it the store's clock through a test hook where one
// can, so that it steps to a millisecond before and after each expiry),
// and an in-memory store to model a new one on. ErrorPolicy, Scrub, AwaitTenure and AwaitGroup hold what every
// store would otherwise write again: error wrapping, keeping secrets out
// of messages, and the compare-after-wake-up body of Wait.
//
// # Why Store is one interface
//
// Store has sixteen methods where client-go's lock has six. They were
// weighed against optional interfaces discovered by type assertion (a
// store without groups, without step-down, without Annotate) and kept
// together, for three reasons. Every method is needed by a feature that
// every store offers: partitions (Join, RenewMember, Leave, GetGroup,
// WaitGroup), planned hand-over (RequestStepDown), the same-host fast path
// (Annotate, Seize) and the operator commands (Get, List). A store without
// one of them would make a flag fail at run time on that store only, which
// the flat interface turns into a compile error and a conformance failure.
// And the methods share one record and one token rule: RequestStepDown's
// reservation changes what Acquire and Seize grant, a group's partitions
// are ordinary leases, so the conformance suite checks them together, and
// splitting the interface would not split the work of writing a store.
// The candidacies (Campaigner) are part of it for the same reasons: a
// step-down's refusal, a clean stop's withdrawal, the priorities and the
// health hand-over all read or write them, on every store.
package lease
