package main

import (
	"fmt"
	"io"
	"strings"
)

// writeOptionsTable writes the README's table of the options of running a
// command: option, environment variable, default, meaning.
func writeOptionsTable(w io.Writer, p program) error {
	fmt.Fprintln(w, "| option | environment | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range p.Flags {
		if f.Name == "version" {
			continue
		}
		env := ""
		if len(f.Env) > 0 {
			env = "`" + f.Env[0] + "`"
		}
		def := strings.Trim(f.Shown, `"`)
		if def != "" {
			def = "`" + def + "`"
		}
		if _, err := fmt.Fprintf(w, "| `--%s` | %s | %s | %s |\n", f.Name, env, def, strings.ReplaceAll(f.Usage, "|", "\\|")); err != nil {
			return err
		}
	}
	return nil
}
