package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// leftBehind are the files the summary points to, each with what it holds;
// every one must exist after a run.
var leftBehind = []struct{ path, what string }{
	{policyFile, "the proxy's policy"},
	{"a.tok, b.tok, b2.tok", "the tokens (delegateos dct inspect --token @b.tok)"},
	{"contract-b.json, attestation-b.json", "B's task contract, signed by A, and B's signed attestation"},
	{workspaceDir + "/delegations.jsonl", "the delegation chain the proxy recorded (chain show reads it)"},
	{workspaceDir + "/task-contracts/", "the task contracts the proxy accepted"},
	{workspaceDir + "/attestations/", "the attestations it verified"},
	{workspaceDir + "/reputation/", "one profile per agent, with its signals"},
	{workspaceDir + "/contracts/", "the RDP contract each evaluation was recorded under"},
	{spendFile, "what each delegation spent"},
	{revocationsFile, "A's signed revocation"},
	{proxyLogFile, "the proxy's log"},
}

// summarize checks that the files are there and says where.
func (d *demo) summarize(elapsed time.Duration) error {
	for _, f := range leftBehind {
		for _, p := range strings.Split(f.path, ", ") {
			if _, err := os.Stat(filepath.Join(d.dir, p)); err != nil {
				return notNarrated("%s is missing: %v", p, err)
			}
		}
	}
	allowed, denied, err := decisions(d.path(proxyLogFile))
	if err != nil {
		return err
	}
	if allowed != d.b.allowed || denied != d.b.refused {
		return notNarrated("%s logs %d allowed and %d denied calls; B's client saw %d and %d", proxyLogFile, allowed, denied, d.b.allowed, d.b.refused)
	}
	d.n.heading(fmt.Sprintf("Done in %.1f s. Everything is still in %s:", elapsed.Seconds(), d.dir))
	width := 0
	for _, f := range leftBehind {
		width = max(width, len(f.path))
	}
	for _, f := range leftBehind {
		what := f.what
		if f.path == proxyLogFile {
			what = fmt.Sprintf("%s: one JSON line per decision (%d allowed, %d denied)", what, allowed, denied)
		}
		d.n.say("%-*s  %s", width, f.path, what)
	}
	return nil
}

// decisions counts the allowed and denied tools/call decisions in the
// proxy's log.
func decisions(path string) (allowed, denied int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Msg     string `json:"msg"`
			Allowed *bool  `json:"allowed"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Msg != "decision" || e.Allowed == nil {
			continue
		}
		if *e.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	return allowed, denied, sc.Err()
}
