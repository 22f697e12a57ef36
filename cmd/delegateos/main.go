// Command delegateos mints, attenuates, inspects, verifies and revokes
// Delegation Capability Tokens. Run "delegateos help" for the commands.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/proxy"
)

// Exit codes shared by every command.
const (
	exitOK     = 0
	exitDenied = 1 // a denial or a failed check
	exitUsage  = 2 // bad usage or unreadable input
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// env is what a command may touch.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// clientRead is set once a command that answers an MCP client on
	// stdin (see command.answersClient) has read from it: its errors
	// after that are not start failures.
	clientRead atomic.Bool
}

// command is one node of the command tree: a leaf runs, a group has subs.
type command struct {
	name    string
	args    string // synopsis after the name
	summary string
	subs    []*command
	// flags declares the flags; run receives them parsed.
	flags func(fs *pflag.FlagSet) func(e *env, args []string) error
	// answersClient: the command speaks MCP on stdin and stdout, so a
	// failure before it reads stdin is also the answer to the client's
	// first request (see proxy.AnswerStartFailure).
	answersClient bool
}

var root = &command{
	name:    "delegateos",
	summary: "accountable delegation between AI agents",
	subs: []*command{
		proxyCmd, serveCmd, pinCmd, keygenCmd, idCmd,
		{name: "dct", summary: "mint, attenuate, inspect and verify delegation capability tokens",
			subs: []*command{mintCmd, attenuateCmd, inspectCmd, verifyCmd}},
		revokeCmd,
		signRequestCmd,
		reputationGroup, rdpContractGroup, workspaceGroup,
		{name: "policy", summary: "check policy files and write starter policies for an MCP server",
			subs: []*command{policyCheckCmd, policyInitCmd}},
		{name: "contract", summary: "create, verify and decompose signed task contracts, and show decomposition plans",
			subs: []*command{contractCreateCmd, contractVerifyCmd, contractDecomposeCmd, contractShowCmd}},
		verifyOutputCmd,
		{name: "attest", summary: "sign and verify attestations of delegated work",
			subs: []*command{attestCreateCmd, attestVerifyCmd}},
		{name: "chain", summary: "show the delegation chain recorded in a workspace",
			subs: []*command{chainShowCmd}},
		spendCmd, storeGroup,
		credentialGroup,
		ldpGroup,
		auditGroup,
	},
}

// usageError means the command line was wrong (exit 2).
type usageError struct {
	msg string
	// fixed: msg says what to do, so "run --help" is not added.
	fixed bool
}

func (e usageError) Error() string { return e.msg }

// usagef is a usage error that the command's help resolves.
func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// fixf is a usage error whose message says what is wrong and what to do.
func fixf(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...), fixed: true}
}

// inputError means input could not be read or understood (exit 2).
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

func inputf(format string, args ...any) error { return inputError{fmt.Errorf(format, args...)} }

// checkError means a check failed or a request was denied (exit 1); the
// command has already written its output.
type checkError struct{ msg string }

func (e checkError) Error() string { return e.msg }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	cmd, path, rest := resolve(root, args)
	if cmd == root && len(rest) == 1 && rest[0] == "--version" {
		writeVersion(stdout)
		return exitOK
	}
	if cmd.flags == nil {
		// A group: its help when asked for; without a command, the help on
		// stderr and exit 2 (a script that forgot the command must not
		// pass); an error if a command was mistyped.
		switch {
		case len(rest) == 0:
			writeGroupHelp(stderr, cmd, path)
			return exitUsage
		case rest[0] != "help" && rest[0] != "-h" && rest[0] != "--help":
			fmt.Fprintf(stderr, "delegateos: unknown command %q; run '%s help'\n", strings.Join(append(path, rest[0]), " "), strings.Join(path, " "))
			return exitUsage
		}
		writeGroupHelp(stdout, cmd, path)
		return exitOK
	}
	fs := pflag.NewFlagSet(strings.Join(path, " "), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	runFn := cmd.flags(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			writeCommandHelp(stdout, cmd, path, fs)
			return exitOK
		}
		msg := fmt.Sprintf("%v; run '%s --help'%s", err, strings.Join(path, " "), dashIDHint(rest))
		fmt.Fprintf(stderr, "%s: %s\n", strings.Join(path, " "), msg)
		if cmd.answersClient {
			proxy.AnswerStartFailure(stdin, stdout, strings.Join(path, " ")+" cannot start: "+msg)
		}
		return exitUsage
	}
	err := runFn(e, fs.Args())
	if err == nil {
		return exitOK
	}
	msg, code := failure(path, err)
	fmt.Fprintf(stderr, "%s: %s\n", strings.Join(path, " "), msg)
	if cmd.answersClient && !e.clientRead.Load() {
		proxy.AnswerStartFailure(e.stdin, e.stdout, strings.Join(path, " ")+" cannot start: "+msg)
	}
	return code
}

// failure is how a command's error is reported: its message (what is
// wrong and what to do) and the exit code.
func failure(path []string, err error) (string, int) {
	var ue usageError
	var ce checkError
	switch {
	case errors.As(err, &ue) && ue.fixed:
		return oneLine(err.Error()), exitUsage
	case errors.As(err, &ue):
		return fmt.Sprintf("%v; run '%s --help'", err, strings.Join(path, " ")), exitUsage
	case errors.As(err, &ce):
		return oneLine(err.Error()), exitDenied
	default:
		return oneLine(err.Error()), exitUsage
	}
}

// resolve walks the command tree along args; "help X" is "X --help".
func resolve(c *command, args []string) (*command, []string, []string) {
	path := []string{c.name}
	if len(args) > 0 && args[0] == "help" && c == root && len(args) > 1 {
		args = append(args[1:], "--help")
	}
	for len(args) > 0 && c.subs != nil {
		next := find(c, args[0])
		if next == nil {
			break
		}
		c, path, args = next, append(path, next.name), args[1:]
	}
	return c, path, args
}

func find(c *command, name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func writeGroupHelp(w io.Writer, c *command, path []string) {
	fmt.Fprintf(w, "%s — %s\n\nUsage:\n  %s COMMAND [FLAGS]\n\nCommands:\n", strings.Join(path, " "), c.summary, strings.Join(path, " "))
	var lines []string
	var walk func(c *command, prefix string)
	walk = func(c *command, prefix string) {
		for _, s := range c.subs {
			if s.flags != nil {
				lines = append(lines, fmt.Sprintf("  %-22s %s", prefix+s.name, s.summary))
			} else {
				walk(s, prefix+s.name+" ")
			}
		}
	}
	prefix := ""
	if len(path) > 1 {
		prefix = strings.Join(path[1:], " ") + " "
	}
	walk(c, prefix)
	sort.Strings(lines)
	fmt.Fprintln(w, strings.Join(lines, "\n"))
	fmt.Fprintf(w, "\nRun 'delegateos COMMAND --help' for a command's flags, 'delegateos --version' for the version.\n")
	fmt.Fprintf(w, "Exit status: 0 success, 1 denied or check failed, 2 bad usage or unreadable input.\n")
}

func writeCommandHelp(w io.Writer, c *command, path []string, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "%s — %s\n\nUsage:\n  %s %s\n\nFlags:\n%s", strings.Join(path, " "), c.summary, strings.Join(path, " "), c.args, fs.FlagUsages())
}

// dashIDHint explains the one way a correct-looking command line fails to
// parse: a principal ID is base64url and may start with '-', which reads
// as a flag.
func dashIDHint(args []string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") {
			if _, err := identity.NormalizePrincipal(a); err == nil {
				return fmt.Sprintf(" (%.12s… is a principal ID that starts with '-', which reads as a flag: put it after --, or give its did:key)", a)
			}
		}
	}
	return ""
}
