package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// serveArgs parses a delegateos serve command line (after "serve") with the
// command's own flags, and returns the flag set.
func serveArgs(t *testing.T, where string, argv []string) *pflag.FlagSet {
	t.Helper()
	if len(argv) < 2 || filepath.Base(argv[0]) != "delegateos" || argv[1] != "serve" {
		t.Fatalf("%s: the command is not delegateos serve: %q", where, argv)
	}
	fs := pflag.NewFlagSet("delegateos serve", pflag.ContinueOnError)
	serveCmd.flags(fs)
	if err := fs.Parse(argv[2:]); err != nil {
		t.Fatalf("%s: %q does not parse with delegateos serve's flags: %v", where, argv, err)
	}
	if fs.NArg() == 0 {
		t.Fatalf("%s: no upstream command after --", where)
	}
	return fs
}

// unitFile reads a systemd unit: section.key = value (the last wins).
func unitFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: not a unit file line: %q", path, line)
			}
			out[section+"."+strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// The systemd unit and the container example in deploy/ run delegateos
// serve with flags it has, drain within the time they give it, and do not
// expose a plain-HTTP gate to the network.
func TestDeployFiles(t *testing.T) {
	unit := unitFile(t, "../../deploy/delegateos-serve.service")
	exec := unit["Service.ExecStart"]
	if strings.ContainsAny(exec, `"'\$%`) {
		t.Fatalf("ExecStart uses quoting or specifiers this test does not read: %s", exec)
	}
	fs := serveArgs(t, "delegateos-serve.service", strings.Fields(exec))
	drain, _ := fs.GetDuration("drain-timeout")
	stop, err := time.ParseDuration(unit["Service.TimeoutStopSec"] + "s")
	if err != nil || stop <= drain+5*time.Second {
		t.Errorf("TimeoutStopSec=%s must outlast --drain-timeout %s (and the upstreams' shutdown)", unit["Service.TimeoutStopSec"], drain)
	}
	if unit["Service.KillSignal"] != "SIGTERM" {
		t.Errorf("KillSignal=%q: serve drains on SIGTERM", unit["Service.KillSignal"])
	}
	if l, _ := fs.GetString("listen"); !strings.HasPrefix(l, "127.0.0.1:") {
		t.Errorf("the unit listens on %s without TLS", l)
	}

	b, err := os.ReadFile("../../deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var entry []string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			if err := json.Unmarshal([]byte(rest), &entry); err != nil {
				t.Fatalf("Containerfile: ENTRYPOINT is not a JSON array: %v", err)
			}
		}
	}
	fs = serveArgs(t, "Containerfile", entry)
	if cert, _ := fs.GetString("tls-cert"); cert == "" {
		t.Errorf("the container listens on the network without --tls-cert")
	}
	if hosts, _ := fs.GetStringArray("allow-host"); len(hosts) == 0 {
		t.Errorf("the container gives no --allow-host: clients reaching it by name would be refused")
	}
}
