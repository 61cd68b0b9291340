package main

import (
	"fmt"
	"io"
	"strings"
	"text/template"
)

// The scripts share one shape: words after "--" are the command leaderrun
// runs and are completed as a command line of their own; before it, the
// first word that is neither an option nor an option's value selects a
// subcommand, whose options are then offered; an option's value is
// completed where the definition (or a hint) says what it is.

var completions = template.Must(template.New("").Funcs(template.FuncMap{
	"join":  strings.Join,
	"zdesc": zshDescription,
}).Parse(bashTemplate + zshTemplate + fishTemplate))

type scriptData struct {
	program
	ValueFlags []option
}

// FreeValueNames are the names, with dashes, of the value flags whose
// values cannot be completed.
func (d scriptData) FreeValueNames() []string {
	var names []string
	for _, f := range d.ValueFlags {
		if !f.File && len(f.Choices) == 0 {
			names = append(names, "--"+f.Name)
		}
	}
	return names
}

// ValueNames are the value flags' names with their dashes.
func (d scriptData) ValueNames() []string {
	var names []string
	for _, f := range d.ValueFlags {
		names = append(names, "--"+f.Name)
	}
	return names
}

// FishLines are the fish complete commands for the options and
// subcommands.
func (d scriptData) FishLines() []string {
	var lines []string
	flags := func(cond string, fs []option) {
		for _, f := range fs {
			l := fmt.Sprintf("complete -c %s -n %s -l %s", d.Name, fishQuote(cond), f.Name)
			switch {
			case f.File:
				l += " -r -F"
			case len(f.Choices) > 0:
				l += " -x -a " + fishQuote(strings.Join(f.Choices, " "))
			case f.Value:
				l += " -x"
			}
			lines = append(lines, l+" -d "+fishQuote(f.Usage))
		}
		lines = append(lines, fmt.Sprintf("complete -c %s -n %s -s h -l help -d 'show help'", d.Name, fishQuote(cond)))
	}
	top := "__" + d.Name + "_top"
	flags(top, d.Flags)
	for _, c := range d.Commands {
		lines = append(lines, fmt.Sprintf("complete -c %s -n %s -a %s -d %s", d.Name, top, c.Name, fishQuote(c.Usage)))
	}
	for _, c := range d.Commands {
		flags("__"+d.Name+"_in "+c.Name, c.Flags)
	}
	return lines
}

func writeCompletion(w io.Writer, shell string, p program) error {
	return completions.ExecuteTemplate(w, shell, scriptData{p, p.valueFlags()})
}

// zshDescription escapes text for the [description] of an _arguments spec
// inside single quotes.
func zshDescription(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`).Replace(s)
	return strings.ReplaceAll(s, `'`, `'\''`)
}

// fishQuote quotes s as one fish word.
func fishQuote(s string) string {
	return `'` + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + `'`
}

const bashTemplate = `{{define "bash" -}}
# bash completion for {{.Name}}. Generated from the CLI definition by
# packaging/gen; do not edit.

_{{.Name}}() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local i word cmd=
	# "--name=x" arrives as three words: --name, =, x.
	if [[ $cur == = ]]; then
		cur=
	elif [[ $prev == = ]]; then
		prev=${COMP_WORDS[COMP_CWORD-2]}
	fi
	for ((i = 1; i < COMP_CWORD; i++)); do
		word=${COMP_WORDS[i]}
		case $word in
		--)
			# The rest is the command {{.Name}} runs.
			if declare -F _command_offset >/dev/null; then
				_command_offset $((i + 1))
			elif ((i + 1 == COMP_CWORD)); then
				mapfile -t COMPREPLY < <(compgen -c -- "$cur")
			else
				compopt -o filenames 2>/dev/null
				mapfile -t COMPREPLY < <(compgen -f -- "$cur")
			fi
			return
			;;
		{{join .ValueNames " | "}})
			[[ ${COMP_WORDS[i + 1]} == = ]] && ((i++))
			((i++))
			;;
		-*) ;;
		*) [[ -z $cmd ]] && cmd=$word ;;
		esac
	done
	case $prev in
{{- range .ValueFlags}}{{if .File}}
	--{{.Name}})
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
{{- else if .Choices}}
	--{{.Name}})
		mapfile -t COMPREPLY < <(compgen -W "{{join .Choices " "}}" -- "$cur")
		return
		;;
{{- end}}{{end}}
	{{join .FreeValueNames " | "}})
		return # a value nothing can guess
		;;
	esac
	local words
	case $cmd in
	"")
		if [[ $cur == -* ]]; then
			words="{{range .Flags}}--{{.Name}} {{end}}--help --"
		else
			words="{{range $i, $c := .Commands}}{{if $i}} {{end}}{{$c.Name}}{{end}}"
		fi
		;;
{{- range .Commands}}
	{{.Name}}) words="{{range .Flags}}--{{.Name}} {{end}}--help" ;;
{{- end}}
	*) return ;;
	esac
	mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
}
complete -F _{{.Name}} {{.Name}}
{{end}}`

const zshTemplate = `{{define "zsh-flags" -}}
{{- range .}}
			'--{{.Name}}{{if .Value}}=[{{zdesc .Usage}}]:{{.Name}}:{{if .File}}_files{{else if .Choices}}({{join .Choices " "}}){{else}} {{end}}'{{else}}[{{zdesc .Usage}}]'{{end}} \
{{- end}}
			'(- *)'{-h,--help}'[show help]'
{{- end}}

{{- define "zsh" -}}
#compdef {{.Name}}
# zsh completion for {{.Name}}. Generated from the CLI definition by
# packaging/gen; do not edit.

_{{.Name}}_commands() {
	local -a commands=(
{{- range .Commands}}
		'{{.Name}}:{{zdesc .Usage}}'
{{- end}}
	)
	_describe -t commands '{{.Name}} command' commands
}

_{{.Name}}() {
	local -a value_flags=({{join .ValueNames " "}})
	local i cmd=
	for ((i = 2; i < CURRENT; i++)); do
		case $words[i] in
		--)
			# The rest is the command {{.Name}} runs.
			shift $i words
			((CURRENT -= i))
			_normal
			return
			;;
		--*=*) ;;
		-*) ((${value_flags[(I)$words[i]]})) && ((i++)) ;;
		*)
			cmd=$words[i]
			break
			;;
		esac
	done
	if [[ -n $cmd ]]; then
		shift $((i - 1)) words
		((CURRENT -= i - 1))
	fi
	case $cmd in
	'')
		_arguments -s : \
{{- template "zsh-flags" .Flags}} \
			'1:command:_{{.Name}}_commands'
		;;
{{- range .Commands}}
	{{.Name}})
		_arguments -s : \
{{- template "zsh-flags" .Flags}}
		;;
{{- end}}
	esac
}

_{{.Name}} "$@"
{{end}}`

const fishTemplate = `{{define "fish" -}}
# fish completion for {{.Name}}. Generated from the CLI definition by
# packaging/gen; do not edit.

# The subcommand on the command line before "--", if any.
function __{{.Name}}_subcommand
    set -l skip 0
    for word in (commandline -opc)[2..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch $word
            case --
                return 1
            case {{join .ValueNames " "}}
                set skip 1
            case '-*'
            case '*'
                echo $word
                return 0
        end
    end
    return 1
end

function __{{.Name}}_child
    contains -- -- (commandline -opc)
end

function __{{.Name}}_top
    not __{{.Name}}_child; and not __{{.Name}}_subcommand >/dev/null
end

function __{{.Name}}_in
    not __{{.Name}}_child; and test "$(__{{.Name}}_subcommand)" = $argv[1]
end

# Completes the words after "--" as a command line of their own.
function __{{.Name}}_complete_child
    set -l words (commandline -opc) (commandline -ct)
    set -l i (contains -i -- -- $words)
    complete -C (string join ' ' -- (string escape -- $words[(math $i + 1)..-1]))
end

complete -c {{.Name}} -f
complete -c {{.Name}} -n __{{.Name}}_child -x -a '(__{{.Name}}_complete_child)'
{{- range .FishLines}}
{{.}}
{{- end}}
{{end}}`
