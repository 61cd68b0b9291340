// Package kubernetes is a lease.Store on the Kubernetes API server's
// coordination.k8s.io/v1 Leases, the objects client-go's leader election
// uses, for replicas that run as pods and have no other shared service. It
// registers the DSN scheme "k8s".
//
// Part of the default build (make test-kube, which CI runs, tests it
// against a kube-apiserver that make kube-apiserver builds); -tags
// nokubernetes leaves it out. It costs every leaderrun process, whatever
// its store, and most of all each start: its slim REST clients (client.go;
// 98 k8s.io packages linked) add 56 package initialisers. Measured
// 2026-12-06 with make build's flags (stripped), on a busy 2-core machine
// (load 9–10), against the build without it: `leaderrun version` 12.64
// against 10.71 ms p50 (hyperfine, 6 interleaved rounds of 50 runs each);
// the binary 41,992,354 against 35,848,354 bytes; an idle standby's RSS
// on SQLite 5.6–5.9 against 5.1–5.2 MB (5 interleaved pairs). (With
// client-go's clientset, 420 packages, an idle leader's RSS had been 20 MB
// more, so the store keeps to its slim clients.)
//
// # Connecting
//
//	k8s://NAMESPACE[?kubeconfig=PATH&context=NAME]
//
// Without kubeconfig the configuration is kubectl's ($KUBECONFIG, then
// ~/.kube/config) and, in a pod without either, the pod's service account;
// k8s:// without a namespace uses the context's or the pod's. Open asks
// the server (SelfSubjectAccessReview) whether the user may get, list,
// watch, create and update leases in the namespace, and refuses naming
// what is missing; packaging/kubernetes/rbac.yaml has the Role. leaderrun
// deletes a Lease only to forget a name (Forget), which takes the delete
// verb as well. A kubeconfig is read only when it, and every
// directory and symbolic link on the way to it, belongs to this user or
// root and no other user could have written it (checkKubeconfig): its
// exec plugin runs as this user. The store's errors, and client-go's log of a
// failed watch, are scrubbed of the kubeconfig's credentials and of the
// credential each request carried (credentials), which a server or a
// proxy may echo.
//
// # Objects
//
// A name is one Lease. A name that is a valid object name is the Lease's
// own name, so that a client-go elector configured with the same name
// contends for the same Lease; other names (capitals, spaces, longer than
// 253 bytes) become a readable prefix and a hash. The spec is what
// client-go writes: holderIdentity, leaseDurationSeconds (the TTL rounded
// up to whole seconds), acquireTime, renewTime and leaseTransitions. The
// annotations carry what a Lease has no field for: leaderrun/token (the
// fencing token), leaderrun/holder (the last holder, also once released),
// leaderrun/state (JSON: released, step-down request and reservation,
// Where, candidates). Leases leaderrun wrote are labelled
// app.kubernetes.io/managed-by=leaderrun.
//
// A group (--partitions) is one Lease of its own, whose leaderrun/group
// annotation holds the number of partitions, the members' expiries and
// every partition's record, so that a member's renewal round is one
// update whatever the number of partitions. Partitions are not Leases of
// their own, and client-go electors cannot share them.
//
// # Atomicity and clock
//
// Every operation reads the Lease, decides, and updates it with the
// resourceVersion it read (optimistic concurrency): the update fails with a
// conflict when anyone wrote in between, and the operation reads and
// decides again. Renewals first try the Lease as the handle last wrote it,
// which saves the read when nobody else wrote.
//
// Expiry is judged by the API server's clock, read from the Date header of
// every response (see serverClock): a holder writes renewTime no earlier
// than the server's time when it sent the update, and a follower takes a
// Lease over only once the server's clock has surely passed renewTime plus
// the lease duration. Tokens are max(last token + 1, the server's clock in
// milliseconds), so they grow even when a Lease is deleted.
//
// # Followers
//
// Each handle watches the namespace's Leases with a client-go informer,
// started by its first Wait; a change of a Lease wakes its waiters, which
// compare the informer's copy with what they saw.
//
// # client-go's electors
//
// A Lease whose holder is not leaderrun (a client-go elector under the
// same name) is respected: leaderrun takes it only once its holder is
// empty (client-go's release) or the Lease has stayed unchanged for its
// lease duration, as measured on the local clock from when this handle
// first saw it so — the rule client-go's own electors follow, so that a
// holder that renews is never overtaken whatever its clock says. Step-down
// of such a holder is refused. client-go's electors respect leaderrun's
// tenure the same way: leaderrun renews by updating renewTime, which they
// observe; a released name has an empty holderIdentity, which they take
// at once.
package kubernetes
