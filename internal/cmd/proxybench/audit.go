package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// auditSetup is the proxy with an audit log: the same proxy, given a
// policy that names a proxy key and an audit log in dir, so that every
// call leaves a signed decision and execution receipt.
func auditSetup(o options, dos, dir, root, tokenFile string, upstream []string) (setup, error) {
	if o.profile != "" {
		return setup{}, errors.New("-audit and -cpuprofile do not go together")
	}
	key := filepath.Join(dir, "proxy.key")
	if out, err := exec.Command(dos, "keygen", "--out", key, "--name", "bench-proxy").CombinedOutput(); err != nil {
		return setup{}, fmt.Errorf("delegateos keygen: %v: %s", err, strings.TrimSpace(string(out)))
	}
	pol := filepath.Join(dir, "audit-policy.yaml")
	body := fmt.Sprintf("proxy_key: %q\naudit_log: %q\n", key, filepath.Join(dir, "audit.log"))
	if err := os.WriteFile(pol, []byte(body), 0o600); err != nil {
		return setup{}, err
	}
	argv := []string{dos, "proxy", "--token", "@" + tokenFile, "--root", root, "--log", filepath.Join(dir, "proxy-audit.log"), "--policy", pol}
	argv = append(argv, strings.Fields(o.proxyFlags)...)
	argv = append(append(argv, "--"), upstream...)
	return setup{name: "proxy+audit", argv: argv}, nil
}

// printAudit compares the proxy with an audit log (setup 3) to the proxy
// without (setup 2).
func printAudit(med []sample, lat time.Duration) {
	if len(med) < 4 {
		return
	}
	direct, off, on := med[0], med[2], med[3]
	addedOff, addedOn := float64(off.p50-direct.p50), float64(on.p50-direct.p50)
	if addedOff <= 0 {
		addedOff = float64(lat)
	}
	fmt.Printf("\naudit log on ÷ off: added p50 %.2f (%s µs vs %s µs), throughput %.2f (%s/s vs %s/s)\n",
		addedOn/addedOff, us(on.p50-direct.p50), us(off.p50-direct.p50), on.throughput/off.throughput, thousands(on.throughput), thousands(off.throughput))
}
