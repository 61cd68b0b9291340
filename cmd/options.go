package cmd

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// The operator commands (status, watch, step-down, forget) take --name, --store and
// --store-file after their name, before it (where they are leaderrun's own
// options), or from their LEADERRUN_ environment variables.

// sharedOptions are the options of running a command that mean the same to
// the operator commands.
var sharedOptions = []string{"name", "store", "store-file", "log-format", "log-level", "help", "h"}

// option returns the value of the string option name: given after the
// subcommand, or before it, or from its environment variable.
func option(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		if slices.Contains(ctx.LocalFlagNames(), name) {
			if v := ctx.String(name); v != "" {
				return v
			}
		}
	}
	return c.String(name)
}

// nameArg is the lease name of an operator command: its argument, or
// --name (see option). Giving both, or more arguments, is an error.
func nameArg(c *cli.Context) (string, error) {
	args := c.Args().Slice()
	name := option(c, "name")
	switch {
	case len(args) > 1:
		return "", usagef("unexpected arguments %q: give one NAME", args[1:])
	case len(args) == 1 && name != "" && name != args[0]:
		return "", usagef("the name %q and --name %q: give one", args[0], name)
	case len(args) == 1:
		return args[0], nil
	}
	return name, nil
}

// refuseRunOptions reports the options of running a command that were given
// before an operator command, where they mean nothing (a --ttl before
// status, say). args are leaderrun's own arguments; flags are its options,
// to tell which take a value.
func refuseRunOptions(args []string, flags []cli.Flag, commands []*cli.Command) error {
	i := firstWord(args, flags)
	if i < 0 || !slices.ContainsFunc(commands, func(c *cli.Command) bool { return c.HasName(args[i]) }) {
		return nil // no subcommand, or COMMAND given without "--"
	}
	for _, a := range args[1:i] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !slices.Contains(sharedOptions, name) {
			return usagef("--%s applies to running a command, not to %s; leave it out", name, args[i])
		}
	}
	return nil
}
