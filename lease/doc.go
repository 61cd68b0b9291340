// Package lease elects one holder per name through a shared Store and keeps
// its tenure honest.
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
// store's expiry.
package lease
