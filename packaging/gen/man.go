package main

import (
	"fmt"
	"io"
	"strings"
)

// docsURL is where the README and its pages are read: --help's "Manual:"
// paragraph, the systemd unit's Documentation= and the man page's SEE ALSO
// name it (TestManualNamedAlike).
const docsURL = "https://github.com/leaderrun/leaderrun"

// writeMan writes the section 1 manual page in roff (man(7) macros).
func writeMan(w io.Writer, p program, version string) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %s 1 \"\" %s \"User Commands\"\n", strings.ToUpper(p.Name), quoteArg(p.Name+" "+version))
	b.WriteString(".nh\n.ad l\n") // no hyphenation, ragged right: names and options stay whole
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", p.Name, roff(p.Usage))

	b.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, line := range strings.Split(strings.TrimSpace(p.UsageText), "\n") {
		b.WriteString(roffLine(strings.TrimSpace(line)) + "\n")
	}
	description, examples, exit := splitDescription(p.Description)
	b.WriteString(".fi\n.SH DESCRIPTION\n")
	paragraphs(&b, description)
	b.WriteString(".SH OPTIONS\n")
	flagItems(&b, p.Flags)

	b.WriteString(".SH COMMANDS\n")
	for _, c := range p.Commands {
		fmt.Fprintf(&b, ".SS %s\n", c.Name)
		if c.UsageText != "" {
			fmt.Fprintf(&b, ".nf\n%s\n.fi\n", roffLine(c.UsageText))
		}
		paragraphs(&b, sentence(c.Usage)+"\n\n"+c.Description)
		flagItems(&b, c.Flags)
	}

	if exit != "" {
		b.WriteString(".SH EXIT STATUS\n")
		paragraphs(&b, exit)
	}
	if len(examples) > 0 {
		b.WriteString(".SH EXAMPLES\n.nf\n")
		for _, l := range examples {
			b.WriteString(roffLine(strings.TrimSpace(l)) + "\n")
		}
		b.WriteString(".fi\n")
	}

	b.WriteString(`.SH FILES
.TP
.I /usr/lib/systemd/system/leaderrun@.service
systemd template unit: the instance is the lease name, as in
.BR "systemctl enable --now leaderrun@relay" .
It reads
.IR /etc/leaderrun/ NAME .env ,
whose
.B LEADERRUN_COMMAND
is the command (split at whitespace, no shell) and whose other
.BR LEADERRUN_ *
variables set the options above.
.TP
.I /etc/leaderrun/example.env
an annotated example of such a file.
.TP
.I /var/lib/leaderrun/leaderrun.db
the default SQLite store when run as root; another user's is
.IR $XDG_STATE_HOME/leaderrun/leaderrun.db
.RI ( ~/.local/state/leaderrun/leaderrun.db ).
.TP
.IR /run/leaderrun/ ", " $XDG_RUNTIME_DIR/leaderrun/ ", " /tmp/leaderrun- UID /
the runtime directory (root's, another user's, or without a runtime
directory): one FIFO
.BI end- PIDNS - PID - START - SEQ
per tenure, by which a follower on the same host takes over at once.
Each goes with its tenure; one a killed leader left, once a follower
proves that leader dead or the next leader of that user in the same PID
namespace starts.
.SH SEE ALSO
.BR systemd.service (5),
.BR systemd.exec (5)
.PP
The README and its pages (recipes, operating, signals and exit status,
the files leaderrun writes, the guarantees):
.UR ` + docsURL + `
.UE ;
the packages install them in
.IR /usr/share/doc/leaderrun .
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// splitDescription separates the "Examples:" and "Exit status:"
// paragraphs of the help's description, which have sections of their own
// in a manual page, from the rest, and leaves out the "Manual:"
// paragraph, which SEE ALSO says in a manual page's words.
func splitDescription(text string) (description string, examples []string, exit string) {
	var rest []string
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		switch {
		case strings.HasPrefix(para, "Examples:\n"):
			examples = strings.Split(strings.TrimPrefix(para, "Examples:\n"), "\n")
		case strings.HasPrefix(para, "Exit status: "):
			exit = "The exit status is " + strings.TrimPrefix(para, "Exit status: ")
		case strings.HasPrefix(para, "Manual: "):
		default:
			rest = append(rest, para)
		}
	}
	return strings.Join(rest, "\n\n"), examples, exit
}

// paragraphs renders blank-line separated paragraphs; a paragraph with
// indented lines (examples) keeps its line breaks.
func paragraphs(b *strings.Builder, text string) {
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		para = strings.Trim(para, "\n")
		if para == "" {
			continue
		}
		lines := strings.Split(para, "\n")
		indented := false
		for _, l := range lines[1:] {
			indented = indented || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		}
		b.WriteString(".PP\n")
		if !indented {
			for _, l := range lines {
				b.WriteString(roffLine(l) + "\n")
			}
			continue
		}
		b.WriteString(roffLine(lines[0]) + "\n.RS\n.nf\n")
		for _, l := range lines[1:] {
			b.WriteString(roffLine(strings.TrimSpace(l)) + "\n")
		}
		b.WriteString(".fi\n.RE\n")
	}
}

func flagItems(b *strings.Builder, flags []option) {
	for _, f := range flags {
		b.WriteString(".TP\n")
		if f.Value {
			fmt.Fprintf(b, "\\fB\\-\\-%s\\fR \\fI%s\\fR\n", roff(f.Name), metavar(f))
		} else {
			fmt.Fprintf(b, "\\fB\\-\\-%s\\fR\n", roff(f.Name))
		}
		text := sentence(f.Usage)
		if f.Default != "" {
			text += " Default: " + f.Default + "."
		}
		b.WriteString(roffLine(text) + "\n")
		for _, e := range f.Env {
			fmt.Fprintf(b, ".br\nEnvironment: \\fB%s\\fR\n", roff(e))
		}
	}
}

// sentence capitalizes a usage string and ends it with a period.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func metavar(f option) string {
	switch {
	case f.File:
		return "FILE"
	case f.Duration:
		return "DURATION"
	}
	return strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
}

// roff escapes text for use inside a line.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// roffLine escapes a whole text line: one starting with a control
// character would be read as a request.
func roffLine(s string) string {
	s = roff(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func quoteArg(s string) string { return `"` + strings.ReplaceAll(roff(s), `"`, `""`) + `"` }
