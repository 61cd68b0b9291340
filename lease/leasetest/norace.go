//go:build !race

package leasetest

const raceDetector = false
