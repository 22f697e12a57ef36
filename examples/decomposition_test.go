package examples

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// TestDecompositionWalkthrough runs decomposition/walkthrough.sh with the
// delegateos and docserver built for these tests and checks that each
// step did what its narration says.
func TestDecompositionWalkthrough(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("decomposition", "walkthrough.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\nset -euo pipefail\n") {
		t.Error("walkthrough.sh does not set -euo pipefail")
	}
	dir, err := filepath.Abs("decomposition")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "plan")
	out := runShell(t, dir, t.TempDir(), "unset DELEGATEOS; DOCSERVER="+shellQuote(mcptest.Docserver(t))+" ./walkthrough.sh "+shellQuote(work))
	at := 0
	for _, want := range []string{
		"\n== 1. Keys", "\n== 3. Alice splits the task",
		"summarize \"Summarize them\"  waiting  assignee carol  spent 0 of 30000  waits for gather",
		"\n== 4. Alice delegates the plan",
		`dependency_pending — sub-task "summarize" (delegation del_`, `waits for "gather" (delegation del_`,
		"bob's gather call:\nallowed",
		"\n== 5. Bob completes gather", `"status":"completed"`, "carol's call now:\nallowed",
		"\n== 6. Carol completes summarize", "bob's review call:\nallowed",
		"\n== 7. Alice completes the report", `"status":"completed"`,
		"\n== 8. Where the money went", "plan plan_", "(sequential, 3 sub-tasks, allotted 60000)",
		`sub-task "gather" of plan plan_`, "allotted 20000  reserved 0  spent 100  returned 19900",
		"graph TD\n", "  n0 --> n1\n  n1 --> n2\n", "\n== Done.",
	} {
		i := strings.Index(out[at:], want)
		if i < 0 {
			t.Fatalf("%q is missing or out of order:\n%s", want, out)
		}
		at += i
	}
	if n := strings.Count(out, ":::completed"); n != 3 {
		t.Errorf("the diagram shows %d completed sub-tasks, want 3:\n%s", n, out)
	}
}
