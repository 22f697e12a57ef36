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

	"github.com/delegateos/delegateos/policy"
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
	if unit["Service.ExecReload"] != "/bin/kill -HUP $MAINPID" {
		t.Errorf("ExecReload=%q: serve reloads its policy on SIGHUP", unit["Service.ExecReload"])
	}
	// With Type=simple systemd sends ExecReload's SIGHUP as soon as the
	// process is forked, which ends it if it comes before serve takes
	// SIGHUP; serve tells systemd when it is ready (sd_notify).
	if unit["Service.Type"] != "notify" {
		t.Errorf("Type=%q: serve says READY=1 once it listens and reloads on SIGHUP; Type=notify holds reloads back until then", unit["Service.Type"])
	}
	if unit["Service.KillSignal"] != "SIGTERM" {
		t.Errorf("KillSignal=%q: serve drains on SIGTERM", unit["Service.KillSignal"])
	}
	if l, _ := fs.GetString("listen"); !strings.HasPrefix(l, "127.0.0.1:") {
		t.Errorf("the unit listens on %s without TLS", l)
	}

	// Every file the example policy makes the gate write is in the unit's
	// StateDirectory (writable), not beside the policy in /etc/delegateos
	// (ReadOnlyPaths, and read-only under ProtectSystem=strict anyway).
	pol, err := policy.Load("../../deploy/policy.yaml")
	if err != nil {
		t.Fatalf("deploy/policy.yaml: %v", err)
	}
	stateDir := "/var/lib/" + unit["Service.StateDirectory"]
	if pol.StateDir != stateDir || unit["Service.Environment"] != "DELEGATEOS_STATE_DIR="+stateDir {
		t.Errorf("state_dir %q, Environment %q: want both to be the unit's StateDirectory %s", pol.StateDir, unit["Service.Environment"], stateDir)
	}
	if p, _ := fs.GetString("policy"); p != "/etc/delegateos/policy.yaml" || !strings.Contains(unit["Service.ReadOnlyPaths"], "/etc/delegateos") {
		t.Errorf("the unit's policy %s is not the read-only /etc/delegateos/policy.yaml the example is for", p)
	}
	for _, path := range []string{pol.RevocationList, pol.SpendStore, pol.AuditLog, pol.Workspace} {
		if path == "" || !strings.HasPrefix(path, stateDir+"/") {
			t.Errorf("deploy/policy.yaml: %q is written by the gate but is not in %s", path, stateDir)
		}
	}
	if logFile, _ := fs.GetString("log"); !strings.HasPrefix(logFile, "/var/log/"+unit["Service.LogsDirectory"]+"/") {
		t.Errorf("--log %s is not in the unit's LogsDirectory", logFile)
	}

	b, err := os.ReadFile("../../deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var entry []string
	envs := map[string]string{}
	volume := ""
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			if err := json.Unmarshal([]byte(rest), &entry); err != nil {
				t.Fatalf("Containerfile: ENTRYPOINT is not a JSON array: %v", err)
			}
		}
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			k, v, _ := strings.Cut(rest, "=")
			envs[k] = v
		}
		if rest, ok := strings.CutPrefix(line, "VOLUME "); ok {
			volume = rest
		}
	}
	fs = serveArgs(t, "Containerfile", entry)
	if _, err := flagsFromEnv(fs, func(k string) string { return envs[k] }, "token"); err != nil {
		t.Fatalf("Containerfile: ENV does not parse as serve's flags: %v", err)
	}
	if cert, _ := fs.GetString("tls-cert"); cert == "" {
		t.Errorf("the container listens on the network without --tls-cert")
	}
	if l, _ := fs.GetString("listen"); !strings.HasSuffix(l, ":8931") {
		t.Errorf("the container listens on %q, not the port it exposes", l)
	}
	if !strings.Contains(string(b), "-e DELEGATEOS_ALLOW_HOST=") {
		t.Errorf("the container's run example gives no DELEGATEOS_ALLOW_HOST: clients reaching it by name would be refused")
	}
	if volume != stateDir || envs["DELEGATEOS_STATE_DIR"] != stateDir {
		t.Errorf("the container's volume %q and DELEGATEOS_STATE_DIR %q must be the example policy's state_dir %s", volume, envs["DELEGATEOS_STATE_DIR"], stateDir)
	}
}

// Flags come from DELEGATEOS_<FLAG> when the command line does not give
// them; the command line wins, and a repeatable flag takes a list.
func TestFlagsFromEnv(t *testing.T) {
	fs := pflag.NewFlagSet("delegateos serve", pflag.ContinueOnError)
	serveCmd.flags(fs)
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9", "--", "true"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DELEGATEOS_LISTEN": "0.0.0.0:1", "DELEGATEOS_ALLOW_HOST": "a.example, b.example",
		"DELEGATEOS_MAX_SESSIONS": "7", "DELEGATEOS_TOKEN": "not-a-flag-here"}
	set, err := flagsFromEnv(fs, func(k string) string { return env[k] }, "token")
	if err != nil {
		t.Fatal(err)
	}
	listen, _ := fs.GetString("listen")
	hosts, _ := fs.GetStringArray("allow-host")
	n, _ := fs.GetInt("max-sessions")
	tok, _ := fs.GetString("token")
	if listen != "127.0.0.1:9" || strings.Join(hosts, " ") != "a.example b.example" || n != 7 || tok != "" || len(set) != 2 {
		t.Errorf("listen %s hosts %q max-sessions %d token %q set %q", listen, hosts, n, tok, set)
	}
	env = map[string]string{"DELEGATEOS_MAX_SESSIONS": "many"}
	fs = pflag.NewFlagSet("delegateos serve", pflag.ContinueOnError)
	serveCmd.flags(fs)
	if _, err := flagsFromEnv(fs, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "DELEGATEOS_MAX_SESSIONS") {
		t.Errorf("a bad value: %v", err)
	}
}
