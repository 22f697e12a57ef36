package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The README says every command takes --json. The proxy is the exception:
// its standard output is the MCP protocol.
func TestEveryCommandTakesJSON(t *testing.T) {
	all := leaves(root, []string{"delegateos"})
	for _, l := range all {
		c, path := l.cmd, l.path
		fs := pflag.NewFlagSet(strings.Join(path, " "), pflag.ContinueOnError)
		c.flags(fs)
		has := fs.Lookup("json") != nil
		if name := strings.Join(path, " "); name == "delegateos proxy" {
			if has {
				t.Errorf("%s takes --json, but its output is the protocol", name)
			}
		} else if !has {
			t.Errorf("%s does not take --json", name)
		}
	}
	if len(all) < 20 {
		t.Fatalf("walked only %d commands", len(all))
	}
}

// Run without a command, delegateos (and each group) prints its usage on
// standard error and exits 2: a script that lost its command must fail.
func TestNoCommandIsUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"dct"}, {"policy"}} {
		var out, errb bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errb)
		if code != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "Usage:\n") || !strings.Contains(errb.String(), "Commands:\n") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
	// Asked for, the help goes to standard output with exit 0.
	for _, args := range [][]string{{"help"}, {"--help"}, {"dct", "help"}, {"dct", "--help"}} {
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != exitOK || !strings.Contains(out.String(), "Usage:\n") || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}
