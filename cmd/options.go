package cmd

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// The operator commands (status, watch, step-down) take --name, --store and
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
	case len(args) > 1 && strings.HasPrefix(args[1], "-"):
		return "", usagef("%s after the name %q: options go before NAME (leaderrun %s [options] NAME)", args[1], args[0], c.Command.Name)
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
	takesValue := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var before []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			if !slices.ContainsFunc(commands, func(c *cli.Command) bool { return c.HasName(a) }) {
				return nil // COMMAND given without "--"
			}
			for _, opt := range before {
				if !slices.Contains(sharedOptions, opt) {
					return usagef("--%s applies to running a command, not to %s; leave it out", opt, a)
				}
			}
			return nil
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		before = append(before, name)
		if takesValue[name] && !hasValue {
			i++
		}
	}
	return nil
}
