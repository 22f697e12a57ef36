package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeCommand is one command shown in a ```sh block of the README.
type readmeCommand struct {
	line     int
	text     string // the command, continuation lines joined
	wantExit int
	wantOut  string // a word the command's output must contain, if annotated
	heredoc  string // the delimiter while a here-document is being read
}

// heredoc finds "<<EOF" or "<<'EOF'" starting a here-document.
var heredoc = regexp.MustCompile(`<<-?'?([A-Za-z_]+)'?`)

// annotation is "# exit N" or "# exit N (word)" at the end of a command.
var annotation = regexp.MustCompile(`\s+#\s*exit (\d+)(?:\s+\(([^)]+)\))?\s*$`)

func readmeCommands(t *testing.T, path string) []readmeCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []readmeCommand
	in := false
	var cur *readmeCommand
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in || strings.TrimSpace(line) == "":
			continue
		}
		if cur != nil && cur.heredoc != "" {
			// Inside a here-document: keep lines verbatim up to its delimiter.
			cur.text += "\n" + line
			if strings.TrimSpace(line) == cur.heredoc {
				cur.heredoc = ""
				cmds = append(cmds, *cur)
				cur = nil
			}
			continue
		}
		if cur == nil {
			cur = &readmeCommand{line: n}
		}
		text := strings.TrimSpace(line)
		if m := heredoc.FindStringSubmatch(text); m != nil {
			cur.text += text
			cur.heredoc = m[1]
			continue
		}
		if cont := strings.HasSuffix(text, "\\"); cont {
			cur.text += strings.TrimSuffix(text, "\\")
			continue
		}
		cur.text += text
		if m := annotation.FindStringSubmatch(cur.text); m != nil {
			cur.wantExit, _ = strconv.Atoi(m[1])
			cur.wantOut = m[2]
			cur.text = cur.text[:len(cur.text)-len(m[0])]
		}
		cmds = append(cmds, *cur)
		cur = nil
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// TestREADME runs every command the README shows, in order, in one shell,
// as a new user would: the install command builds the binary that the rest
// use. Commands annotated "# exit N (word)" must exit N and print word;
// the others must succeed. "make" commands are run by CI (.ci/run), which
// this test checks instead of recursing into them.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(t, filepath.Join(repo, "README.md"))
	ci, err := os.ReadFile(filepath.Join(repo, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	work, bin := t.TempDir(), t.TempDir()
	var script strings.Builder
	fmt.Fprintf(&script, "export PATH=%q:\"$PATH\"\n", bin)
	ran := 0
	for i, c := range cmds {
		word := strings.Fields(c.text)[0]
		switch {
		case word == "make":
			target := strings.TrimSpace(strings.SplitN(c.text, "#", 2)[0])
			if !strings.Contains(string(ci), "\n"+target+"\n") {
				t.Errorf("README line %d: %q is not run by .ci/run", c.line, target)
			}
			continue
		case strings.HasPrefix(c.text, "go install"):
			fmt.Fprintf(&script, "cd %q && GOBIN=%q %s || { echo 'README line %d: install failed' >&2; exit 97; }\ncd %q\n", repo, bin, c.text, c.line, work)
			ran++
			continue
		}
		fmt.Fprintf(&script, "{ %s\n} >.out.%d 2>.err.%d\nrc=$?\ncat .out.%d .err.%d\n", c.text, i, i, i, i)
		fmt.Fprintf(&script, "if [ $rc -ne %d ]; then echo \"README line %d exited $rc, want %d: %s\" >&2; exit 97; fi\n", c.wantExit, c.line, c.wantExit, shellQuoteForEcho(c.text))
		if c.wantOut != "" {
			fmt.Fprintf(&script, "grep -q %q .out.%d .err.%d || { echo \"README line %d: output lacks %s\" >&2; exit 97; }\n", c.wantOut, i, i, c.line, c.wantOut)
		}
		ran++
	}
	if ran < 10 {
		t.Fatalf("found only %d runnable README commands; is the README parsed right?", ran)
	}
	cmd := exec.Command("bash", "-u", "-c", script.String())
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README commands failed: %v\n%s", err, out)
	}
	t.Logf("ran %d README commands", ran)
}

func shellQuoteForEcho(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	return r.Replace(s)
}
