package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/delegateos/delegateos/reputation"
)

// TestReputationScripts runs the reputation, rdp-contract and workspace
// CLI scripts in testdata/reputation.
func TestReputationScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/reputation",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// setenvfile VAR FILE sets VAR to FILE's trimmed contents.
			"setenvfile": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: setenvfile VAR FILE")
				}
				ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile(args[1])))
			},
		},
	})
}

// Two streams of delegateos processes recording signals for one agent at
// the same time lose none.
func TestReputationConcurrentProcesses(t *testing.T) {
	bin, err := exec.LookPath("delegateos")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	agent := "did:key:z6Mko9hTggMwjSTEaJaPUfE6tqcy2xvU6BnNq3e3o8qVBiyH"
	const streams, each = 2, 5
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				out, err := exec.Command(bin, "reputation", "signal", "--workspace", dir, "--agent", agent,
					"--dimension", "reliability", "--score", "0.5", "--source", "did:key:zObserver",
					"--message", fmt.Sprintf("s%d-%d", s, i)).CombinedOutput()
				if err != nil {
					errs <- fmt.Errorf("%v: %s", err, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	w, err := reputation.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.Profile(agent)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Signals) != streams*each || p.Dimensions[reputation.Reliability].SampleSize != streams*each {
		t.Fatalf("%d signals, sample size %d; want %d", len(p.Signals), p.Dimensions[reputation.Reliability].SampleSize, streams*each)
	}
	seen := map[string]bool{}
	for _, s := range p.Signals {
		seen[s.Message] = true
	}
	if len(seen) != streams*each {
		t.Fatalf("%d distinct signals", len(seen))
	}
	entries, _ := os.ReadDir(filepath.Join(dir, reputation.ProfilesDir))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}
