package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestShellWord(t *testing.T) {
	n := newNarrator(nil, false)
	n.define("B", "did:key:z6MkB")
	for in, want := range map[string]string{
		"@b.tok":                   "@b.tok",
		"docs:read:/project/**":    "'docs:read:/project/**'",
		`{"a":1}`:                  `'{"a":1}'`,
		"it's":                     `'it'\''s'`,
		"":                         "''",
		"did:key:z6MkB":            `"$B"`,
		"B=did:key:z6MkB":          `"B=$B"`,
		"Summarize the plan":       "'Summarize the plan'",
		"del_b00000000001":         "del_b00000000001",
		"/tmp/x,y=1+2%3@host:path": "/tmp/x,y=1+2%3@host:path",
	} {
		if got := n.shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}

// A long command is continued before a flag, keeping each flag with its
// value, and every line but the last ends in a backslash.
func TestCommandContinues(t *testing.T) {
	var b bytes.Buffer
	n := newNarrator(&b, false)
	args := []string{"delegateos", "contract", "create"}
	for range 8 {
		args = append(args, "--title", "Summarize the sub-project notes")
	}
	n.command(args, "out.json")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("not continued:\n%s", b.String())
	}
	for i, l := range lines {
		if len(l) > maxCommandLine+2 {
			t.Errorf("line %d is %d long: %s", i, len(l), l)
		}
		if last := i == len(lines)-1; strings.HasSuffix(l, `\`) == last {
			t.Errorf("line %d continuation wrong: %s", i, l)
		}
		if strings.HasSuffix(l, "--title \\") {
			t.Errorf("a flag was split from its value: %s", l)
		}
	}
	if !strings.HasPrefix(lines[0], bodyIndent+"$ delegateos contract create --title") || !strings.HasSuffix(lines[len(lines)-1], "> out.json") {
		t.Errorf("command:\n%s", b.String())
	}
}

func TestHasSignals(t *testing.T) {
	const table = `
     DIMENSION                  SCORE   CONF      N
     reliability                 0.85   0.09      1  ████████░░
     epistemic-hygiene        unknown      -      0
`
	for dim, want := range map[string]bool{"reliability": true, "epistemic-hygiene": false, "coordination": false} {
		if got := hasSignals(table, dim); got != want {
			t.Errorf("hasSignals(%s) = %t", dim, got)
		}
	}
	if hasSignals("     reliability                 0.85   0.09      0", "reliability") {
		t.Error("a row with no signals counts")
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1000000: "1,000,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %s", n, got)
		}
	}
}
