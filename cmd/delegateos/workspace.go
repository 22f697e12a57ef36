package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/reputation"
)

// workspaceGroup holds the commands about the RDP workspace as a whole.
var workspaceGroup = &command{
	name:    "workspace",
	summary: "check an RDP workspace (reputation/ and contracts/)",
	subs:    []*command{workspaceValidateCmd},
}

// workspaceFlag declares --workspace, shared by every reputation command.
func workspaceFlag(fs *pflag.FlagSet) *string {
	return fs.String("workspace", ".", "the AWP workspace directory holding reputation/ and contracts/")
}

// openWorkspace opens the workspace directory, which must exist.
func openWorkspace(dir string) (*reputation.Workspace, error) {
	w, err := reputation.Open(dir)
	if err != nil {
		return nil, inputError{err}
	}
	return w, nil
}

// repError turns the reputation package's errors into exit statuses: a
// refusal (lifecycle, evaluation, conflict) is exit 1, everything else
// (unreadable or invalid files, unknown names, bad values) exit 2.
func repError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reputation.ErrTransition), errors.Is(err, reputation.ErrEvaluation),
		errors.Is(err, reputation.ErrConflict), errors.Is(err, reputation.ErrExists), errors.Is(err, reputation.ErrSelfDealing):
		return checkError{"refused: " + err.Error()}
	}
	return inputError{err}
}

// atFlag reads an optional --at time; empty means now.
func atFlag(s string) (time.Time, error) {
	if s == "" {
		return time.Now().UTC(), nil
	}
	return parseTime("--at", s)
}

// bar draws a score in [0, 1] as ten cells.
func bar(score float64) string {
	n := int(score*10 + 0.5)
	n = max(0, min(10, n))
	return strings.Repeat("█", n) + strings.Repeat("░", 10-n)
}

// shorten clips text for a table column.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var workspaceValidateCmd = &command{
	name:    "validate",
	args:    "[--workspace DIR] [--json]",
	summary: "check every profile and contract against RDP §6: each problem with its file (exit 1 on errors)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print the files checked and the problems as JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			w, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			r, err := w.Validate()
			if err != nil {
				return inputError{err}
			}
			if *asJSON {
				out := struct {
					Workspace string `json:"workspace"`
					OK        bool   `json:"ok"`
					*reputation.Report
				}{*dir, r.Errors() == 0, r}
				if err := writeJSON(e, out); err != nil {
					return err
				}
			} else {
				for _, p := range r.Problems {
					fmt.Fprintln(e.stdout, p.Error())
				}
				fmt.Fprintf(e.stdout, "%d files checked: %s, %s\n", len(r.Files), countOf(r.Errors(), "error"), countOf(r.Warnings(), "warning"))
			}
			if r.Errors() > 0 {
				return checkError{fmt.Sprintf("the workspace has %s", countOf(r.Errors(), "error"))}
			}
			return nil
		}
	},
}

func countOf(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
