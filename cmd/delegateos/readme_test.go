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

// walkthrough is the README and the docs pages whose ```sh blocks
// TestREADME runs, in this order, in one shell and one directory: each
// page continues from the state the pages before it left (keys, tokens,
// policy.yaml, the workspace), as a reader following them does.
var walkthrough = []string{
	"README.md",
	"docs/tokens.md",
	"docs/proxy.md",
	"docs/policy.md",
	"docs/pins.md",
	"docs/approval.md",
	"docs/serve.md",
	"docs/contracts.md",
	"docs/spend.md",
	"docs/evidence.md",
	"docs/reputation.md",
	"docs/credentials.md",
}

// testedElsewhere names, for each docs page with ```sh blocks that is not
// part of the walkthrough, the test that runs its commands.
var testedElsewhere = map[string]string{
	"docs/oauth.md": "TestDocsOAuth",
	"docs/ldp.md":   "TestDocsLDP",
}

// TestREADME runs every command the README and the walkthrough's docs
// pages show, in order, in one shell, as a new user would: the README's
// install command builds the binary that the rest use. Commands annotated
// "# exit N (word)" must exit N and print word; the others must succeed.
// "make" commands are run by CI (.ci/run), which this test checks instead
// of recursing into them.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(repo, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	work, bin := t.TempDir(), t.TempDir()
	var script strings.Builder
	fmt.Fprintf(&script, "export PATH=%q:\"$PATH\"\n", bin)
	ran := 0
	for p, page := range walkthrough {
		cmds := readmeCommands(t, filepath.Join(repo, page))
		if len(cmds) == 0 {
			t.Errorf("%s shows no ```sh commands; take it out of the walkthrough", page)
		}
		for i, c := range cmds {
			n := fmt.Sprintf("%d.%d", p, i)
			where := fmt.Sprintf("%s line %d", page, c.line)
			word := strings.Fields(c.text)[0]
			switch {
			case word == "make":
				target := strings.TrimSpace(strings.SplitN(c.text, "#", 2)[0])
				if !strings.Contains(string(ci), "\n"+target+"\n") {
					t.Errorf("%s: %q is not run by .ci/run", where, target)
				}
				continue
			case strings.HasPrefix(c.text, "go install"):
				fmt.Fprintf(&script, "cd %q && GOBIN=%q %s || { echo '%s: install failed' >&2; exit 97; }\ncd %q\n", repo, bin, c.text, where, work)
				ran++
				continue
			}
			scriptCommand(&script, c, n, where)
			ran++
		}
	}
	if ran < 100 {
		t.Fatalf("found only %d runnable commands; are the README and docs parsed right?", ran)
	}
	cmd := exec.Command("bash", "-u", "-c", script.String())
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README and docs commands failed: %v\n%s", err, out)
	}
	t.Logf("ran %d commands of the README and docs", ran)
}

// TestDocsCommandsTested holds every page that shows ```sh commands to a
// test that runs them: the walkthrough, or one named in testedElsewhere.
func TestDocsCommandsTested(t *testing.T) {
	repo := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repo, "README.md"))
	covered := map[string]bool{}
	for _, p := range walkthrough {
		covered[p] = true
	}
	for p := range testedElsewhere {
		covered[p] = true
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(repo, p)
		rel = filepath.ToSlash(rel)
		if len(readmeCommands(t, p)) > 0 && !covered[rel] {
			t.Errorf("%s shows ```sh commands that no test runs: add it to walkthrough (run by TestREADME) or to testedElsewhere with the test that runs them", rel)
		}
	}
	for p, name := range testedElsewhere {
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			t.Errorf("testedElsewhere names %s (%s): %v", p, name, err)
		}
	}
}

// scriptCommand writes to script the shell lines that run c, keeping its
// output in .out.n and .err.n, and stop the script with status 97 and a
// message naming where it is shown when it exits otherwise than c says or
// lacks the word c says its output has.
func scriptCommand(script *strings.Builder, c readmeCommand, n, where string) {
	fmt.Fprintf(script, "{ %s\n} >.out.%s 2>.err.%s\nrc=$?\ncat .out.%s .err.%s\n", c.text, n, n, n, n)
	fmt.Fprintf(script, "if [ $rc -ne %d ]; then echo \"%s exited $rc, want %d: %s\" >&2; exit 97; fi\n", c.wantExit, where, c.wantExit, shellQuoteForEcho(c.text))
	if c.wantOut != "" {
		fmt.Fprintf(script, "grep -q %q .out.%s .err.%s || { echo \"%s: output lacks %s\" >&2; exit 97; }\n", c.wantOut, n, n, where, c.wantOut)
	}
}

func shellQuoteForEcho(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	return r.Replace(s)
}
