package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The binaries the demo runs, in config.bin.
const (
	delegateosBinary = "delegateos"
	docserverBinary  = "docserver"
)

// cli runs the delegateos command in the demo's directory, as a person
// following along would, and shows the command line first. A non-zero exit
// is an error carrying the command's standard error.
func (d *demo) cli(ctx context.Context, args ...string) (string, error) {
	d.n.command(append([]string{delegateosBinary}, args...), "")
	return d.runCLI(ctx, args)
}

// cliTo is cli with standard output written to file (shown as "> file").
func (d *demo) cliTo(ctx context.Context, file string, args ...string) (string, error) {
	d.n.command(append([]string{delegateosBinary}, args...), file)
	out, err := d.runCLI(ctx, args)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(d.path(file), []byte(out), 0o600); err != nil {
		return "", err
	}
	return out, nil
}

// cliVar is cli shown as NAME=$(delegateos ...): it defines the variable,
// so that later command lines show $NAME for the value.
func (d *demo) cliVar(ctx context.Context, name string, args ...string) (string, error) {
	fmt.Fprintf(d.n.w, "%s$ %s=$(%s)\n", bodyIndent, name, d.n.shellLine(append([]string{delegateosBinary}, args...)))
	out, err := d.runCLI(ctx, args)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(out)
	d.n.evidence(v)
	d.n.define(name, v)
	return v, nil
}

func (d *demo) runCLI(ctx context.Context, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.cfg.bin, delegateosBinary), args...)
	cmd.Dir = d.dir
	cmd.Env = proxyEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("delegateos %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// proxyEnv is this process's environment without DELEGATEOS_TOKEN: a token
// the user happens to have set must not stand in for the demo's.
func proxyEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELEGATEOS_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// readFile reads a file, such as a token, without its surrounding space.
func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}
