package etcd

import (
	"os"
	"testing"

	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
)

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m)) }
