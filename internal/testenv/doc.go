// Package testenv groups what the product's own tests need and production
// code never imports: real servers started or reached for a test (pgtest,
// mysqltest, redistest, etcdtest, kubetest and the kube-apiserver it
// builds), network faults (tcpproxy), hostile peers (fakeserver), the
// rule that a missing server fails a test in CI (citest) and the check of
// the documentation's links (doclinks). The packages
// beside it under internal/ run in leaderrun itself.
package testenv
