package redis

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestConformance(t *testing.T) {
	url := serverURL(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		return harness(t, url)
	})
}
