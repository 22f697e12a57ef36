package importrules

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/delegateos/delegateos/"

// fronts are the packages that take requests from somewhere and hand them
// to the gate; the gate and everything below it know none of them.
var fronts = []string{"proxy", "serve", "metrics", "oauth"}

// rules says what each package may not import, by package path relative
// to the module (a rule for "x" covers x and the packages under it). Every
// package is also held to the rules that hold everywhere (checkEverywhere).
var rules = []struct {
	pkg       string
	forbidden []string
	why       string
}{
	{"gate", fronts, "the gate decides for every front: it knows none of them"},
	{"proxy", []string{"serve", "metrics", "oauth"}, "the stdio relay is one front; serve wraps it, not the reverse"},
	{"metrics", []string{"proxy", "serve"}, "metrics observe the gate (gate.Observer), whatever the front"},
	{"storerecover", fronts, "rebuilding the stores from audit logs needs the gate's names, never a front"},
}

// below are the packages under the gate: tokens, stores, documents and
// the internal helpers. None of them imports the gate or a front.
var below = []string{
	"agentcard", "attest", "audit", "avpsig", "budget", "chain", "contract", "credential", "dct",
	"identity", "ldp", "policy", "ratelimit", "receipt", "reputation", "revdist", "revocation", "tracing",
	"upstreamuser", "verify", "internal/b64", "internal/canon", "internal/cputime", "internal/docstore",
	"internal/freejson", "internal/fsutil", "internal/jsonlines", "internal/logline",
	"internal/mcpdef", "internal/mcplist", "internal/receiptschema", "internal/redisconn",
	"internal/redisset", "internal/redistest", "internal/render", "internal/sig",
	"internal/sqlitedb", "internal/stdio", "internal/strictjson", "internal/timestamp",
}

// covers reports whether the rule for pkg applies to path.
func covers(pkg, path string) bool { return path == pkg || strings.HasPrefix(path, pkg+"/") }

func TestImportRules(t *testing.T) {
	imports := moduleImports(t, filepath.Join("..", ".."))
	if len(imports) < 30 || imports["gate"] == nil || imports["proxy"] == nil {
		t.Fatalf("found %d packages; the module was not read", len(imports))
	}
	for pkg, imps := range imports {
		for imp, file := range imps {
			for _, why := range violations(pkg, imp) {
				t.Errorf("%s imports %s (%s): %s", pkg, imp, file, why)
			}
		}
	}
	// Every package listed below the gate exists, so that a rename
	// cannot quietly drop a rule.
	for _, p := range below {
		if imports[p] == nil {
			t.Errorf("%s is listed below the gate but is not in the module", p)
		}
	}
}

// violations says why pkg may not import imp (both relative to the
// module), or nothing when it may.
func violations(pkg, imp string) []string {
	var why []string
	if (covers("cmd", imp) || covers("internal/cmd", imp)) && !covers("cmd", pkg) && !covers("internal/cmd", pkg) {
		why = append(why, "programs are not libraries: what a second program needs moves out of cmd/")
	}
	if covers("internal/cmd", imp) || covers("cmd", imp) {
		if top(pkg) != top(imp) {
			why = append(why, "one program does not import another")
		}
	}
	for _, r := range rules {
		if covers(r.pkg, pkg) && slices.ContainsFunc(r.forbidden, func(f string) bool { return covers(f, imp) }) {
			why = append(why, r.why)
		}
	}
	if slices.ContainsFunc(below, func(b string) bool { return covers(b, pkg) }) &&
		(covers("gate", imp) || slices.ContainsFunc(fronts, func(f string) bool { return covers(f, imp) })) {
		why = append(why, "packages below the gate know neither the gate nor its fronts")
	}
	return why
}

// top is the program a path under cmd/ or internal/cmd/ belongs to.
func top(p string) string {
	parts := strings.Split(p, "/")
	if parts[0] == "internal" && len(parts) > 2 {
		return strings.Join(parts[:3], "/")
	}
	if len(parts) > 1 {
		return strings.Join(parts[:2], "/")
	}
	return p
}

// moduleImports reads the imports of every Go file under root (tests and
// every build tag included), by package directory relative to root, each
// import with a file that makes it.
func moduleImports(t *testing.T, root string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if out[pkg] == nil {
			out[pkg] = map[string]string{}
		}
		for _, s := range f.Imports {
			imp, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return err
			}
			if rest, ok := strings.CutPrefix(imp, module); ok {
				out[pkg][rest] = filepath.ToSlash(path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The rules catch what they are for: each line is an import that must be
// refused, or allowed.
func TestViolations(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		refused  bool
	}{
		{"gate", "proxy", true},
		{"gate", "serve", true},
		{"gate", "cmd/delegateos", true},
		{"proxy", "serve", true},
		{"proxy", "cmd/delegateos", true},
		{"serve", "internal/cmd/servebench", true},
		{"dct", "gate", true},
		{"budget", "proxy", true},
		{"internal/render", "serve", true},
		{"metrics", "proxy", true},
		{"internal/cmd/demo", "cmd/delegateos", true},
		{"proxy", "gate", false},
		{"serve", "proxy", false},
		{"serve", "gate", false},
		{"metrics", "gate", false},
		{"cmd/delegateos", "serve", false},
		{"internal/cmd/demo", "gate", false},
		{"gate", "reputation", false},
		{"storerecover", "gate", false},
		{"storerecover", "proxy", true},
		{"upstreamuser", "gate", true},
	} {
		if got := len(violations(c.pkg, c.imp)) > 0; got != c.refused {
			t.Errorf("%s importing %s: refused %v, want %v", c.pkg, c.imp, got, c.refused)
		}
	}
}
