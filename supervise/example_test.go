package supervise_test

import (
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/supervise"
)

func Example() {
	c, err := supervise.Start(supervise.Spec{
		Path:      "echo",
		Args:      []string{"echo", "hello"},
		KillGrace: time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-c.Done()
	st := c.Stop() // kills and reaps anything the child left behind
	fmt.Println(st, st.ExitCode())
	// Output:
	// hello
	// exit status 0 0
}

func ExampleStart_notFound() {
	_, err := supervise.Start(supervise.Spec{Path: "leaderrun-no-such-command"})
	fmt.Println(err)
	// Output:
	// start "leaderrun-no-such-command": command not found
}
