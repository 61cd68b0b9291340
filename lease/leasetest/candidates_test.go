package leasetest

import "testing"

func TestMemoryOtherCandidates(t *testing.T) {
	CheckCandidateReader(t, &Memory{})
}
