package main

import (
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/signals"
)

// program is what the man page and the completions say about leaderrun,
// read from its urfave/cli definition.
type program struct {
	Name        string
	Usage       string
	UsageText   string
	Description string
	Flags       []option
	Commands    []command
}

type command struct {
	Name        string
	Usage       string
	UsageText   string
	Description string
	Flags       []option
}

type option struct {
	Name     string // long name, without dashes
	Value    bool   // takes a value
	Usage    string
	Env      []string
	Default  string // "" when the default is empty, zero or derived
	Shown    string // the default as --help shows it
	Duration bool
	File     bool // the value is a path
	Choices  []string
}

// hint is what the CLI definition cannot say about a option's value.
type hint struct {
	file    bool
	choices func() []string
}

var hints = map[string]hint{
	"store-file":  {file: true},
	"log-format":  {choices: func() []string { return []string{"text", "json"} }},
	"log-level":   {choices: func() []string { return []string{"debug", "info", "warn", "error"} }},
	"stop-signal": {choices: signalNames},
}

// signalNames are the names --stop-signal accepts for the classic signals.
func signalNames() []string {
	var names []string
	for n := syscall.Signal(1); n < 32; n++ {
		name := strings.TrimPrefix(signals.Name(n), "SIG")
		if _, err := signals.Parse(name); err == nil && !strings.ContainsAny(name[:1], "0123456789") {
			names = append(names, name)
		}
	}
	return names
}

func programOf(app *cli.App) (program, error) {
	p := program{Name: app.Name, Usage: app.Usage, UsageText: app.UsageText, Description: app.Description}
	var err error
	if p.Flags, err = flagsOf(app.VisibleFlags()); err != nil {
		return program{}, err
	}
	for _, c := range app.VisibleCommands() {
		if c.Name == "help" {
			continue
		}
		fs, err := flagsOf(c.VisibleFlags())
		if err != nil {
			return program{}, fmt.Errorf("command %s: %w", c.Name, err)
		}
		p.Commands = append(p.Commands, command{
			Name: c.Name, Usage: c.Usage, UsageText: c.UsageText,
			Description: c.Description, Flags: fs,
		})
	}
	return p, nil
}

func flagsOf(flags []cli.Flag) ([]option, error) {
	var out []option
	for _, f := range flags {
		d, ok := f.(cli.DocGenerationFlag)
		if !ok {
			return nil, fmt.Errorf("flag %v: no documentation", f.Names())
		}
		name := d.Names()[0]
		if name == "help" {
			continue
		}
		fl := option{Name: name, Value: d.TakesValue(), Usage: d.GetUsage(), Env: d.GetEnvVars(), Shown: d.GetDefaultText()}
		_, fl.Duration = f.(*cli.DurationFlag)
		if def := d.GetDefaultText(); fl.Value && def != "" && def != "0s" && def != `""` {
			fl.Default = strings.Trim(def, `"`)
		}
		if h, ok := hints[name]; ok {
			fl.File = h.file
			if h.choices != nil {
				fl.Choices = h.choices()
			}
		}
		out = append(out, fl)
	}
	return out, nil
}

// valueFlags are the flags that take a value, once per name, across the
// program and its commands: the completion scripts skip their values when
// looking for a subcommand, and complete them after the flag.
func (p program) valueFlags() []option {
	var out []option
	add := func(fs []option) {
		for _, f := range fs {
			if f.Value && !slices.ContainsFunc(out, func(o option) bool { return o.Name == f.Name }) {
				out = append(out, f)
			}
		}
	}
	add(p.Flags)
	for _, c := range p.Commands {
		add(c.Flags)
	}
	slices.SortFunc(out, func(a, b option) int { return strings.Compare(a.Name, b.Name) })
	return out
}
