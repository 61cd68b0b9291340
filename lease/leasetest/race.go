//go:build race

package leasetest

// raceDetector reports a build with the race detector
// (ModelHarness.RaceSequences).
const raceDetector = true
