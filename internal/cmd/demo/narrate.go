package main

import (
	"fmt"
	"io"
	"strings"
)

// narrator writes the demo's story: numbered headings, a sentence or two
// per step, and the evidence (command lines, messages, key lines of
// answers), indented under the heading.
type narrator struct {
	w           io.Writer
	bold, plain string
	// vars are shell variables the narration introduces (ROOT, A, B): a
	// command line shows "$A" where the argument holds A's ID.
	vars []shellVar
}

type shellVar struct{ name, value string }

const (
	bodyIndent     = "   "
	evidenceIndent = "     "
)

func newNarrator(w io.Writer, color bool) *narrator {
	n := &narrator{w: w}
	if color {
		n.bold, n.plain = "\033[1m", "\033[0m"
	}
	return n
}

// step starts a numbered step.
func (n *narrator) step(num int, title string) {
	fmt.Fprintf(n.w, "\n%s%d. %s%s\n", n.bold, num, title, n.plain)
}

// heading starts an unnumbered section.
func (n *narrator) heading(title string) {
	fmt.Fprintf(n.w, "\n%s%s%s\n", n.bold, title, n.plain)
}

// say writes a sentence of the story.
func (n *narrator) say(format string, args ...any) {
	fmt.Fprintf(n.w, "%s%s\n", bodyIndent, fmt.Sprintf(format, args...))
}

// command shows a command line as a person would type it, continued over
// several lines (before a flag) when it is long.
func (n *narrator) command(args []string, redirect string) {
	var units []string // a flag with its value, or a lone word
	for i := 0; i < len(args); i++ {
		u := n.shellWord(args[i])
		if strings.HasPrefix(args[i], "-") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			u += " " + n.shellWord(args[i])
		}
		units = append(units, u)
	}
	if redirect != "" {
		units = append(units, "> "+redirect)
	}
	line := bodyIndent + "$"
	for _, u := range units {
		if len(line)+1+len(u) > maxCommandLine && strings.TrimSpace(line) != "$" {
			fmt.Fprintf(n.w, "%s \\\n", line)
			line = evidenceIndent + " "
		}
		line += " " + u
	}
	fmt.Fprintln(n.w, line)
}

// maxCommandLine is where a shown command line is continued: a unit longer
// than that (a JSON argument) gets a line of its own.
const maxCommandLine = 100

// send shows a message B's client sends; receive what comes back.
func (n *narrator) send(format string, args ...any) {
	fmt.Fprintf(n.w, "%s→ %s\n", bodyIndent, fmt.Sprintf(format, args...))
}

func (n *narrator) receive(format string, args ...any) {
	fmt.Fprintf(n.w, "%s← %s\n", bodyIndent, fmt.Sprintf(format, args...))
}

// evidence shows output, each line indented under the command.
func (n *narrator) evidence(text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l = strings.TrimRight(l, " \t"); l == "" {
			fmt.Fprintln(n.w)
			continue
		}
		fmt.Fprintf(n.w, "%s%s\n", evidenceIndent, l)
	}
}

// define introduces a shell variable, so later commands can show $name.
func (n *narrator) define(name, value string) {
	n.vars = append(n.vars, shellVar{name, value})
}

// shellLine quotes args the way a POSIX shell reads them, with the IDs the
// narration has named written as variables.
func (n *narrator) shellLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = n.shellWord(a)
	}
	return strings.Join(out, " ")
}

func (n *narrator) shellWord(a string) string {
	for _, v := range n.vars {
		if v.value != "" && strings.Contains(a, v.value) {
			return `"` + strings.ReplaceAll(a, v.value, "$"+v.name) + `"`
		}
	}
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+%") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
