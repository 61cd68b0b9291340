package cmd

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// nearest returns the candidate closest to word when a typo (at most two
// letters wrong, swapped, missing or extra; one for words of up to four
// letters) separates them, else "".
func nearest(word string, candidates []string) string {
	best, bestDist := "", 3
	if len(word) <= 4 {
		bestDist = 2
	}
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(word), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance counts the insertions, deletions, substitutions and swaps
// of neighbours that turn a into b (optimal string alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// flagNames lists every name (aliases too) of flags.
func flagNames(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	return names
}

// commandNames lists every command's name, help's too.
func commandNames(commands []*cli.Command) []string {
	names := []string{"help"}
	for _, c := range commands {
		names = append(names, c.Names()...)
	}
	return names
}

// refuseMistypedCommand reports a first word that is a typo of a
// subcommand (leaderrun stauts) and cannot be a program: there is no "--"
// before it and no such program on PATH.
func refuseMistypedCommand(args []string, hasDash bool, flags []cli.Flag, commands []*cli.Command) error {
	i := firstWord(args, flags)
	if hasDash || i < 0 {
		return nil
	}
	word := args[i]
	if (word == "help" || word == "h") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
		return refuseHelpTopic(args[i+1], commands)
	}
	if slices.Contains(commandNames(commands), word) || strings.ContainsRune(word, '/') {
		return nil
	}
	guess := nearest(word, commandNames(commands))
	if guess == "" {
		return nil
	}
	if _, err := exec.LookPath(word); err == nil {
		return nil
	}
	return usagef("unknown command %q (did you mean %s?); a program to run goes after --", word, guess)
}

// refuseHelpTopic refuses `leaderrun help TOPIC` for a TOPIC that names no
// command, as a mistyped command is refused, instead of the command-line
// library's "No help topic" and exit 1.
func refuseHelpTopic(topic string, commands []*cli.Command) error {
	names := commandNames(commands)
	if slices.Contains(names, topic) {
		return nil
	}
	if guess := nearest(topic, names); guess != "" {
		return usagef("no help topic %q (did you mean %s?); leaderrun help lists the commands", topic, guess)
	}
	return usagef("no help topic %q: the topics are the commands, %s", topic, strings.Join(names, ", "))
}

// firstWord is the index in args (args[0] is the program) of the first
// argument that is neither an option nor an option's value, or -1.
func firstWord(args []string, flags []cli.Flag) int {
	takes := takesValue(flags)
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			return i
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if takes[name] && !hasValue {
			i++
		}
	}
	return -1
}

// takesValue tells, for each name of flags, whether it takes a value.
func takesValue(flags []cli.Flag) map[string]bool {
	m := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			m[n] = !isBool
		}
	}
	return m
}

// optionsFirst moves the options written after an operator command's
// NAME (status relay --json) before it, where urfave/cli looks for them.
func optionsFirst(args []string, flags []cli.Flag, commands []*cli.Command) []string {
	i := firstWord(args, flags)
	if i < 0 {
		return args
	}
	k := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.HasName(args[i]) })
	if k < 0 {
		return args
	}
	takes := takesValue(commands[k].Flags)
	var opts, words []string
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		if !strings.HasPrefix(a, "-") || a == "-" {
			words = append(words, a)
			continue
		}
		opts = append(opts, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if takes[name] && !hasValue && j+1 < len(args) {
			j++
			opts = append(opts, args[j])
		}
	}
	return slices.Concat(args[:i+1], opts, words)
}

// unknownEnv lists the LEADERRUN_ variables of the environment that
// neither name an option nor are set by leaderrun for its command, each
// with the nearest known name ("" when none is close).
func unknownEnv(flags []cli.Flag) (unknown, guesses []string) {
	known := []string{"LEADERRUN_HOLDER", "LEADERRUN_TOKEN", "LEADERRUN_PARTITION", "LEADERRUN_PARTITIONS", "LEADERRUN_SUPERVISOR_TAG",
		// The command line of the shipped systemd unit
		// (packaging/systemd), which its ExecStart= expands.
		"LEADERRUN_COMMAND"}
	for _, f := range flags {
		if e, ok := f.(interface{ GetEnvVars() []string }); ok {
			known = append(known, e.GetEnvVars()...)
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "LEADERRUN_") || slices.Contains(known, k) ||
			strings.HasPrefix(k, "LEADERRUN_INTERNAL_") || strings.Contains(k, "_TEST_") {
			continue
		}
		unknown = append(unknown, k)
		guesses = append(guesses, nearest(k, known))
	}
	return unknown, guesses
}

// warnUnknownEnv warns of each LEADERRUN_ variable that unknownEnv finds: a
// misspelled option would otherwise be ignored without a word.
func warnUnknownEnv(w io.Writer, flags []cli.Flag) {
	unknown, guesses := unknownEnv(flags)
	for i, k := range unknown {
		msg := k + ": no option reads this variable"
		if guesses[i] != "" {
			msg += " (did you mean " + guesses[i] + "?)"
		}
		warnLine(w, msg+"; it is ignored, and not passed to the command")
	}
}

// warnOptionsAfterCommand warns of the words of a command given without
// "--" that are leaderrun's own options (leaderrun --name x ./relay --ttl
// 5s): they go to the command, and an operator who meant them for
// leaderrun would otherwise learn it only from how the command fails.
func warnOptionsAfterCommand(w io.Writer, command []string, flags []cli.Flag) {
	var mine []string
	for _, a := range command[1:] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "--") && len(name) > 1 &&
			slices.ContainsFunc(flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), name) }) {
			mine = append(mine, "--"+name)
		}
	}
	if len(mine) > 0 {
		warnLine(w, fmt.Sprintf("%s after the command %q go to the command, not to leaderrun; if they were meant for leaderrun, put them before the command, and -- between leaderrun's options and the command",
			strings.Join(mine, ", "), command[0]))
	}
}
