package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestDocsLDP runs every command docs/ldp.md shows, in order, in one shell,
// as TestREADME does for the README, with DELEGATE_URL a delegate serving
// the spec's example identity card and REPORTS_URL a live delegate.
func TestDocsLDP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /delegates/qwen3-8b/.well-known/ldp-identity", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(ldpSpecCard))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// A live delegate for 'ldp submit': it trusts the root key the page
	// makes (root.key in the page's directory), read at its first task.
	work := t.TempDir()
	reports := ldpDelegate(t, mcptest.NewKey(t, "unused"), []ldp.PayloadMode{ldp.ModeSemanticFrame, ldp.ModeText}, nil)
	reports.gate.lazyRoot = filepath.Join(work, "root.key")

	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Dir(mcptest.Delegateos(t))
	cmds := readmeCommands(t, filepath.Join(repo, "docs", "ldp.md"))
	var script strings.Builder
	fmt.Fprintf(&script, "export PATH=%q:\"$PATH\"\n", bin)
	for i, c := range cmds {
		scriptCommand(&script, c, fmt.Sprint(i), fmt.Sprintf("docs/ldp.md line %d", c.line))
	}
	if len(cmds) < 3 {
		t.Fatalf("found only %d commands in docs/ldp.md; is it parsed right?", len(cmds))
	}
	cmd := exec.Command("bash", "-u", "-c", script.String())
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "DELEGATE_URL="+srv.URL+"/delegates/qwen3-8b", "REPORTS_URL="+reports.url, "DELEGATEOS_STATE_DIR="+filepath.Join(work, "state"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/ldp.md commands failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
