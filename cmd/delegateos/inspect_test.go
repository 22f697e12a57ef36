package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/render"
)

// hostile strings try to end a Mermaid label, add nodes, edges, click
// handlers and directives, inject HTML, and forge or hide terminal lines.
var hostile = []string{
	"ct\"]\n  evil[\"<img src=x onerror=alert(1)>\"]\n  p0 --> evil\n  click p0 call alert(1)\n%%{init: {\"theme\":\"dark\"}}%%`",
	"del_\"] --> p9[\"x\"]\r\n\u2028\u202e\x1b[31m#quot;&lt;</br>|edge|\ufffd", // invalid UTF-8 cannot reach a token: JSON makes it U+FFFD
	"<script>alert(1)</script>]]>--><!--",
}

func keypair(t testing.TB, b byte, name string) *identity.Keypair {
	t.Helper()
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// inspectTokens returns a benign two-block token and one of the same shape
// whose every free-text field (IDs, capabilities) is hostile, both valid.
func inspectTokens(t *testing.T, root, alice, bob *identity.Keypair) (benign, evil *dct.Token) {
	t.Helper()
	exp := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	build := func(contract, delegation, parentDel, delegation2 string, ns, action, res, res2 string) *dct.Token {
		tok, err := dct.Create(dct.CreateParams{
			Issuer: root, Delegatee: alice.ID(), ContractID: contract, DelegationID: delegation, ParentDelegationID: parentDel,
			Capabilities:  []dct.Capability{{Namespace: ns, Action: action, Resource: res}},
			MaxChainDepth: 2, MaxBudgetMicrocents: 1000, ExpiresAt: exp, IssuedAt: exp.Add(-time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		caps := []dct.Capability{{Namespace: ns, Action: action, Resource: res2}}
		budget := int64(10)
		tok, err = dct.Attenuate(tok, dct.AttenuateParams{
			Attenuator: alice, Delegatee: bob.ID(), DelegationID: delegation2, ContractID: contract,
			Capabilities: &caps, MaxBudgetMicrocents: &budget, Now: exp.Add(-time.Minute),
		})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	benign = build("ct_1", "del_1", "del_0", "del_2", "docs", "read", "/p/**", "/p/sub/*")
	evil = build(hostile[0], hostile[1], hostile[2], hostile[2]+"2",
		"n\"]-->x", "a\n<br/>", "/r]\"/<script>alert(1)<"+"/script>/**", "/r]\"/<script>alert(1)<"+"/script>/"+hostile[2]+"/*")
	return benign, evil
}

// tamper re-signs nothing: it changes the token's JSON with edit and
// serializes it canonically, so the result parses and must be shown as
// invalid.
func tamper(t *testing.T, tok *dct.Token, edit func(*dct.SignedToken)) *dct.Token {
	t.Helper()
	st := tok.Unverified()
	edit(&st)
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := dct.Parse(b64.Encode(c))
	if err != nil {
		t.Fatalf("the tampered token does not parse: %v", err)
	}
	return out
}

// inspect runs delegateos dct inspect on tok and returns its output.
func inspect(t *testing.T, tok *dct.Token, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append([]string{"dct", "inspect", "--token", tok.String()}, args...)
	if code := run(args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("%v: exit %d: %s", args, code, &stderr)
	}
	return stdout.String()
}

var (
	mermaidNode = regexp.MustCompile(`^  (p[0-9]+|invalid)\["(.*)"\]$`)
	mermaidEdge = regexp.MustCompile(`^  p[0-9]+ --> p[0-9]+$`)
	mermaidMisc = regexp.MustCompile(`^(graph TD|  class (p[0-9]+|invalid) (holder|invalid)|  classDef holder fill:#e3f2fd,stroke:#1e88e5,color:#0d47a1|  classDef invalid fill:#ffebee,stroke:#e53935,color:#b71c1c)$`)
)

// mermaidShape checks every line of a diagram against the only forms the
// renderer writes, and returns the diagram with each label replaced by
// "L" and the labels decoded. A label may hold only letters, digits,
// space, '_', '-', '.', well-formed decimal entity codes and <br/>.
func mermaidShape(t *testing.T, diagram string) (shape string, labels []string) {
	t.Helper()
	if !strings.HasSuffix(diagram, "\n") {
		t.Fatalf("the diagram does not end in a newline:\n%s", diagram)
	}
	var sb strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(diagram, "\n"), "\n") {
		if m := mermaidNode.FindStringSubmatch(line); m != nil {
			labels = append(labels, decodeLabel(t, m[2]))
			sb.WriteString("  " + m[1] + "[L]\n")
			continue
		}
		if !mermaidEdge.MatchString(line) && !mermaidMisc.MatchString(line) {
			t.Fatalf("a line the renderer does not write: %q\n%s", line, diagram)
		}
		sb.WriteString(line + "\n")
	}
	return sb.String(), labels
}

func decodeLabel(t *testing.T, label string) string {
	t.Helper()
	var dec strings.Builder
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case strings.HasPrefix(label[i:], "<br/>"):
			dec.WriteByte('\n')
			i += len("<br/>") - 1
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == ' ', c == '_', c == '-', c == '.':
			dec.WriteByte(c)
		case c == '#':
			j := i + 1
			for j < len(label) && '0' <= label[j] && label[j] <= '9' && j-i <= 8 {
				j++
			}
			n, err := strconv.Atoi(label[i+1 : j])
			if err != nil || j == len(label) || label[j] != ';' || n > unicode.MaxRune {
				t.Fatalf("malformed entity code at %d in %q", i, label)
			}
			dec.WriteRune(rune(n))
			i = j
		default:
			t.Fatalf("raw %q at %d in label %q", c, i, label)
		}
	}
	return dec.String()
}

// shown is how a string reads once decoded from a label: invalid UTF-8
// becomes U+FFFD, rune by rune.
func shown(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// No token, however hostile its fields, can change the shape of the
// Mermaid diagram: its lines are exactly those of a benign token of the
// same shape, every label is made of safe characters only, and the
// hostile text is still shown, decoded, where it belongs.
func TestInspectMermaidHostile(t *testing.T) {
	root, alice, bob := keypair(t, 1, "root"), keypair(t, 2, "alice"), keypair(t, 3, "bob")
	benign, evil := inspectTokens(t, root, alice, bob)
	want, _ := mermaidShape(t, inspect(t, benign, "--format", "mermaid"))
	if strings.Count(want, "[L]") != 3 || strings.Count(want, " --> ") != 2 || strings.Contains(want, "invalid[") {
		t.Fatalf("the benign diagram is not three nodes and two edges:\n%s", want)
	}

	// Hostile names are labels too.
	names := []string{"--name", "r\"]\n  x --> y=" + root.ID(), "--name", "<b onclick>alert(1)</b>=" + alice.DID()}
	diagram := inspect(t, evil, append([]string{"--format", "mermaid"}, names...)...)
	shape, labels := mermaidShape(t, diagram)
	if shape != want {
		t.Fatalf("a hostile token changed the diagram:\n%s\nwant the shape of\n%s", diagram, want)
	}
	all := strings.Join(labels, "\n")
	for _, s := range append(hostile, "r\"]\n  x --> y", "<b onclick>alert(1)</b>", "n\"]-->x:a\n<br/>:/r]\"/<script>alert(1)</script>/**") {
		if !strings.Contains(all, shown(s)) {
			t.Errorf("the labels do not show %q:\n%s", s, all)
		}
	}

	// A tampered token adds only the invalid node, whose label (holding the
	// hostile capability the chain problem names) is escaped like the rest.
	bad := tamper(t, evil, func(st *dct.SignedToken) {
		caps := append(*st.Attenuations[0].AllowedCapabilities, dct.Capability{Namespace: hostile[0], Action: "x", Resource: "/**"})
		st.Attenuations[0].AllowedCapabilities = &caps
	})
	diagram = inspect(t, bad, "--format", "mermaid")
	shape, labels = mermaidShape(t, diagram)
	if wantBad := strings.Replace(want, "  classDef", "  invalid[L]\n  class invalid invalid\n  classDef", 1); shape != wantBad {
		t.Fatalf("the tampered token's diagram:\n%s\nwant the shape of\n%s", diagram, wantBad)
	}
	last := labels[len(labels)-1]
	if !strings.Contains(last, "signatures INVALID") || !strings.Contains(last, "chain INVALID") || !strings.Contains(last, shown(hostile[0])) {
		t.Errorf("the invalid node does not say what is wrong: %q", last)
	}
}

// checkLines fails unless every line of out is valid UTF-8 made of
// printable characters only.
func checkLines(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !utf8.ValidString(line) {
			t.Fatalf("%s: a line is not UTF-8: %q", what, line)
		}
		for _, r := range line {
			if !unicode.IsPrint(r) {
				t.Fatalf("%s: %U in line %q", what, r, line)
			}
		}
	}
}

// The text and tree formats show every hostile string Go-quoted on the
// line it belongs to: a token cannot add, end or hide a line.
func TestInspectTextHostile(t *testing.T) {
	root, alice, bob := keypair(t, 1, "root"), keypair(t, 2, "alice"), keypair(t, 3, "bob")
	benign, evil := inspectTokens(t, root, alice, bob)
	bad := tamper(t, evil, func(st *dct.SignedToken) {
		caps := append(*st.Attenuations[0].AllowedCapabilities, dct.Capability{Namespace: hostile[0], Action: "x", Resource: "/**"})
		st.Attenuations[0].AllowedCapabilities = &caps
	})
	for _, format := range []string{"text", "tree"} {
		want := strings.Count(inspect(t, benign, "--format", format), "\n")
		out := inspect(t, evil, "--format", format)
		checkLines(t, format, out)
		if got := strings.Count(out, "\n"); got != want {
			t.Errorf("%s: a hostile token made %d lines, a benign one %d:\n%s", format, got, want, out)
		}
		for _, s := range hostile {
			if !strings.Contains(out, render.Printable(s)) {
				t.Errorf("%s: %q is not shown as %s:\n%s", format, s, render.Printable(s), out)
			}
		}
		if !strings.Contains(out, strconv.Quote(hostile[0])) {
			t.Errorf("%s: a contract ID with line breaks is not shown quoted:\n%s", format, out)
		}
		out = inspect(t, bad, "--format", format)
		checkLines(t, format, out)
		// The two lines of the effective grant become one saying why not.
		if got := strings.Count(out, "\n"); got != want-1 {
			t.Errorf("%s: a tampered hostile token made %d lines, a benign one %d:\n%s", format, got, want, out)
		}
		if !strings.Contains(out, "signatures: INVALID: ") || !strings.Contains(out, "\nchain: INVALID: \"capability expansion") {
			t.Errorf("%s: the tampered token is not shown invalid:\n%s", format, out)
		}
	}
	// Names come from the command line, and are shown the same way.
	out := inspect(t, evil, "--format", "tree", "--name", "r\"]\n\x1b[2J="+root.ID(), "--name", "\u202ebob="+bob.ID())
	checkLines(t, "tree with names", out)
	if !strings.Contains(out, "\n"+`"r\"]\n\x1b[2J"  (root issuer)`+"\n") || !strings.Contains(out, `└─ "\u202ebob"  [1] attenuation`) {
		t.Errorf("tree: hostile names are not shown quoted:\n%s", out)
	}
}

// A block signed by someone other than the principal above it is shown
// with its signer, in the tree and in the diagram, and the token invalid.
func TestInspectForeignSigner(t *testing.T) {
	root, alice, bob := keypair(t, 1, "root"), keypair(t, 2, "alice"), keypair(t, 3, "bob")
	mallory := keypair(t, 4, "mallory")
	benign, _ := inspectTokens(t, root, alice, bob)
	bad := tamper(t, benign, func(st *dct.SignedToken) {
		st.Attenuations[0].Attenuator = mallory.ID()
		st.Signatures[1].Signer = mallory.ID()
	})
	names := []string{"--name", "alice=" + alice.ID(), "--name", "bob=" + bob.ID(), "--name", "mallory=" + mallory.ID()}
	tree := inspect(t, bad, append([]string{"--format", "tree"}, names...)...)
	if !strings.Contains(tree, "\n   └─ bob  [1] attenuation, signed by mallory\n") || !strings.Contains(tree, "\nchain: INVALID: attenuator mismatch") {
		t.Errorf("tree:\n%s", tree)
	}
	if strings.Contains(inspect(t, benign, append([]string{"--format", "tree"}, names...)...), "signed by") {
		t.Error("a valid chain names its signers")
	}
	diagram := inspect(t, bad, append([]string{"--format", "mermaid"}, names...)...)
	if !strings.Contains(diagram, `  p2["bob<br/>block 1 #183; attenuation #183; signed by mallory<br/>`) || !strings.Contains(diagram, "  class invalid invalid\n") {
		t.Errorf("mermaid:\n%s", diagram)
	}
}

// Whatever strings a token's issuer writes, the tree and the text are
// printable lines of the same number as a benign token's, and the diagram
// has exactly the benign diagram's shape.
func FuzzInspectRender(f *testing.F) {
	root, alice := keypair(f, 1, "root"), keypair(f, 2, "alice")
	exp := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	mint := func(contract, delegation, ns, action, resource string) (*dct.Token, error) {
		return dct.Create(dct.CreateParams{
			Issuer: root, Delegatee: alice.ID(), ContractID: contract, DelegationID: delegation,
			Capabilities:  []dct.Capability{{Namespace: ns, Action: action, Resource: resource}},
			MaxChainDepth: 1, MaxBudgetMicrocents: 1, ExpiresAt: exp, IssuedAt: exp.Add(-time.Hour),
		})
	}
	benign, err := mint("ct_1", "del_1", "docs", "read", "/p")
	if err != nil {
		f.Fatal(err)
	}
	// What a benign token renders as, computed once: each run compares
	// against it.
	benignLines := map[string]int{}
	for _, format := range []string{"text", "tree"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"dct", "inspect", "--token", benign.String(), "--format", format}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			f.Fatalf("inspect --format %s of a benign token: exit %d: %s", format, code, &stderr)
		}
		benignLines[format] = strings.Count(stdout.String(), "\n")
	}
	f.Add("ct_1", "del_1", "docs", "read", "/p/**", "alice")
	for _, h := range hostile {
		f.Add(h, h, h, h, "/"+h, h)
	}
	f.Fuzz(func(t *testing.T, contract, delegation, ns, action, resource, name string) {
		tok, err := mint(contract, delegation, ns, action, resource)
		if err != nil {
			return // not a token dct.Create makes
		}
		var names []string
		if name != "" && !strings.Contains(name, "=") { // NAME=ID: a name ends at the first '='
			names = []string{"--name", name + "=" + alice.ID()}
		}
		for _, format := range []string{"text", "tree"} {
			var args []string
			if format == "tree" {
				args = names
			}
			out := inspect(t, tok, append([]string{"--format", format}, args...)...)
			checkLines(t, format, out)
			if got, want := strings.Count(out, "\n"), benignLines[format]; got != want {
				t.Fatalf("%s: %d lines, a benign token makes %d:\n%s", format, got, want, out)
			}
		}
		want, _ := mermaidShape(t, inspect(t, benign, "--format", "mermaid"))
		got, labels := mermaidShape(t, inspect(t, tok, append([]string{"--format", "mermaid"}, names...)...))
		if got != want || !strings.Contains(labels[1], shown(contract)) {
			t.Fatalf("diagram of shape\n%s\nwant\n%s\nlabels %q", got, want, labels)
		}
	})
}
