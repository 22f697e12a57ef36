package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// The CLI reference (docs/cli.md) and the command table of docs/commands.md are
// written from the command tree itself, so they cannot drift from it;
// TestCLIReference fails when the checked-in copies differ.

// leaves returns every runnable command with its path, in tree order.
func leaves(c *command, path []string) []struct {
	cmd  *command
	path []string
} {
	var out []struct {
		cmd  *command
		path []string
	}
	for _, s := range c.subs {
		p := append(append([]string(nil), path...), s.name)
		if s.flags != nil {
			out = append(out, struct {
				cmd  *command
				path []string
			}{s, p})
		} else {
			out = append(out, leaves(s, p)...)
		}
	}
	return out
}

// writeCLIReference writes docs/cli.md: every command's --help.
func writeCLIReference(w io.Writer) {
	fmt.Fprint(w, "# delegateos command reference\n\n")
	fmt.Fprint(w, "Generated from the commands' own `--help` by `make docs`; a test fails when it is out of date.\n\n")
	var top bytes.Buffer
	writeGroupHelp(&top, root, []string{root.name})
	fmt.Fprintf(w, "```\n$ delegateos help\n%s```\n", top.String())
	for _, l := range leaves(root, []string{root.name}) {
		name := strings.Join(l.path, " ")
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		fs.SortFlags = false
		l.cmd.flags(fs)
		var help bytes.Buffer
		writeCommandHelp(&help, l.cmd, l.path, fs)
		fmt.Fprintf(w, "\n## %s\n\n```\n$ %s --help\n%s```\n", name, name, help.String())
	}
}

// writeCommandTable writes the table of commands in docs/commands.md.
func writeCommandTable(w io.Writer) {
	fmt.Fprint(w, "| command | does |\n|---|---|\n")
	for _, l := range leaves(root, []string{root.name}) {
		usage := strings.Join(l.path, " ")
		if l.cmd.args != "" {
			usage += " " + oneLine(l.cmd.args)
		}
		usage = strings.ReplaceAll(usage, "|", `\|`)
		fmt.Fprintf(w, "| `%s` | %s |\n", usage, strings.ReplaceAll(l.cmd.summary, "|", `\|`))
	}
}
