package mcptest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// raceExitOption keeps a race-enabled binary from sleeping a second as it
// exits, which it does by default to let late reports out.
const raceExitOption = "atexit_sleep_ms=10"

// builds holds what this test binary has built, in a directory of its own.
var builds struct {
	sync.Mutex
	dir  string
	n    int
	done map[buildKey]*buildResult
}

type buildKey struct {
	pkg  string
	race bool
}

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Run runs the tests and then removes the binaries they built: call it from
// TestMain as os.Exit(mcptest.Run(m)). Under the race detector it first
// adds an option to GORACE so that the race-enabled binaries the tests run,
// including those run by scripts, do not each sleep a second as they exit.
func Run(m *testing.M) int {
	if RaceEnabled {
		os.Setenv("GORACE", goraceValue())
	}
	code := m.Run()
	builds.Lock()
	dir := builds.dir
	builds.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	return code
}

// goraceValue is GORACE with raceExitOption added.
func goraceValue() string {
	v := os.Getenv("GORACE")
	if strings.Contains(v, "atexit_sleep_ms=") {
		return v
	}
	return strings.TrimSpace(v + " " + raceExitOption)
}

// Delegateos returns the delegateos binary built from ./cmd/delegateos,
// with the race detector when the tests run with it.
func Delegateos(t testing.TB) string {
	t.Helper()
	return Build(t, "./cmd/delegateos", RaceEnabled)
}

// Docserver returns the docserver binary built from ./examples/docserver,
// without the race detector: it is the upstream, not what is under test.
func Docserver(t testing.TB) string {
	t.Helper()
	return Build(t, "./examples/docserver", false)
}

// Build builds the package pkg of this module (a path relative to the
// module root, such as "./examples/library"), with the race detector if
// race, and returns the binary's path. A package is built once per test
// binary however many tests ask, into a directory where it stands alone;
// a failed build fails every test that asks for it.
func Build(t testing.TB, pkg string, race bool) string {
	t.Helper()
	key := buildKey{pkg, race}
	builds.Lock()
	if builds.done == nil {
		builds.done = map[buildKey]*buildResult{}
	}
	r := builds.done[key]
	if r == nil {
		r = &buildResult{}
		builds.done[key] = r
	}
	builds.Unlock()
	r.once.Do(func() { r.path, r.err = build(pkg, race) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.path
}

func build(pkg string, race bool) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	builds.Lock()
	if builds.dir == "" {
		if builds.dir, err = os.MkdirTemp("", "mcptest-"); err != nil {
			builds.Unlock()
			return "", err
		}
	}
	builds.n++
	dir := filepath.Join(builds.dir, fmt.Sprint(builds.n))
	builds.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	name := path.Base(pkg)
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	// go test puts $GOROOT/bin first on PATH.
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, output)
	}
	return out, nil
}

// moduleRoot is the directory holding go.mod, above the working directory
// (go test runs a package's tests in its directory).
var moduleRoot = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("mcptest: no go.mod above the working directory")
		}
		dir = parent
	}
})

// ModuleRoot returns the root directory of the module under test.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// FixtureDir returns the docserver's fixture tree,
// examples/docserver/testdata.
func FixtureDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(ModuleRoot(t), "examples", "docserver", "testdata")
}

// Fixture returns the content of a file of the docserver's fixture tree,
// such as "project/sub/notes.md".
func Fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(FixtureDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// CopyFixture copies the docserver's fixture tree to dir, which must not
// exist yet, and returns dir.
func CopyFixture(t testing.TB, dir string) string {
	t.Helper()
	if err := os.CopyFS(dir, os.DirFS(FixtureDir(t))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CLI runs the delegateos binary with args and returns its standard
// output, its standard error and its exit status.
func CLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(Delegateos(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A proxy or server it starts remembers its stores in a directory of
	// its own, not the user's.
	cmd.Env = append(os.Environ(), "GORACE="+goraceValue(), "DELEGATEOS_STATE_DIR="+t.TempDir())
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}
