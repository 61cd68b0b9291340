package etcd

import (
	"os"
	"testing"

	"github.com/leaderrun/leaderrun/internal/etcdtest"
)

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m)) }
