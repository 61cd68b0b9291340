package e2e

import "testing"

// TestOperatorStores runs the operator commands' scripts
// (testdata/script/operator_*.txtar) once per store: what step-down and
// forget decide depends on what each store records of a name and its
// candidates (a replica that stops cleanly withdraws its candidacy; forget
// deletes both). TestScripts runs them on SQLite too.
func TestOperatorStores(t *testing.T) { runFilesPerStore(t, "../testdata/script/operator_*.txtar") }
