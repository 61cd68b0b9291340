package e2e

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestOperatorStores runs the operator commands' scripts
// (testdata/script/operator_*.txtar) once per store: what step-down and
// forget decide depends on what each store records of a name and its
// candidates (a replica that stops cleanly withdraws its candidacy; forget
// deletes both). TestScripts runs them on SQLite too.
func TestOperatorStores(t *testing.T) {
	files, err := filepath.Glob("../testdata/script/operator_*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no operator scripts: %v", err)
	}
	for _, s := range scriptStores {
		t.Run(s.name, func(t *testing.T) {
			storeFor := s.open(t)
			p := scriptParams("", func(env *testscript.Env) error {
				env.Setenv("LEADERRUN_STORE", storeFor(env))
				env.Setenv("STORE_KIND", s.name)
				return nil
			}, s.name == "postgres")
			p.Files = files
			testscript.Run(t, p)
		})
	}
}
