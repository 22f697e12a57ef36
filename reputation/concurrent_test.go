package reputation

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// childEnv makes the test binary a recording process (see TestMain).
const childEnv = "REPUTATION_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// runChild records n signals, one Record call each, with messages
// "<tag>-0", "<tag>-1", ...: "dir|agent|source|tag|n".
func runChild(spec string) int {
	parts := strings.Split(spec, "|")
	n, _ := strconv.Atoi(parts[4])
	w, err := Open(parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; i < n; i++ {
		s := Signal{Source: parts[2], Dimension: Reliability, Score: 0.5, Timestamp: t0, Message: fmt.Sprintf("%s-%d", parts[3], i)}
		if _, err := w.Record(parts[1], "", s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// startChild starts a recording process.
func startChild(t *testing.T, dir, agent, source, tag string, n int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%s|%d", childEnv, dir, agent, source, tag, n))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// checkWriters verifies that each writer's signals are all there (want[tag]
// of them, or any number when want is -1), in the order it recorded them,
// and that the stored sample size counts every signal.
func checkWriters(t *testing.T, p *Profile, want map[string]int) {
	t.Helper()
	next := map[string]int{}
	for _, s := range p.Signals {
		tag, num, ok := strings.Cut(s.Message, "-")
		i, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Fatalf("unexpected signal %+v", s)
		}
		if i != next[tag] {
			t.Fatalf("writer %s: signal %d after %d: lost or reordered", tag, i, next[tag]-1)
		}
		next[tag]++
	}
	for tag, n := range want {
		if n >= 0 && next[tag] != n {
			t.Fatalf("writer %s: %d signals, want %d", tag, next[tag], n)
		}
	}
	if got := p.Dimensions[Reliability].SampleSize; got != len(p.Signals) {
		t.Fatalf("sampleSize %d for %d signals", got, len(p.Signals))
	}
}

// Goroutines recording for one agent through separate Workspace values
// lose nothing.
func TestConcurrentGoroutines(t *testing.T) {
	dir := t.TempDir()
	agent, src := testKey(t, 1).ID(), testKey(t, 2).ID()
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := Open(dir)
			if err != nil {
				errs <- err
				return
			}
			for i := range each {
				s := Signal{Source: src, Dimension: Reliability, Score: 0.5, Timestamp: t0, Message: fmt.Sprintf("g%d-%d", g, i)}
				if _, err := w.Record(agent, "", s); err != nil {
					errs <- err
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
	w, _ := Open(dir)
	p, err := w.Profile(agent)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for g := range writers {
		want[fmt.Sprintf("g%d", g)] = each
	}
	checkWriters(t, p, want)
}

// Two processes recording for one agent at once lose nothing.
func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	agent, src := testKey(t, 1).DID(), testKey(t, 2).DID()
	const each = 40
	a := startChild(t, dir, agent, src, "a", each)
	b := startChild(t, dir, agent, src, "b", each)
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	w, _ := Open(dir)
	p, err := w.Profile(agent)
	if err != nil {
		t.Fatal(err)
	}
	checkWriters(t, p, map[string]int{"a": each, "b": each})
}

// A process killed at any moment while recording leaves a profile that
// loads, holding every signal it finished recording and nothing torn.
func TestKilledWriterLeavesValidFile(t *testing.T) {
	dir := t.TempDir()
	w, _ := Open(dir)
	agent, src := testKey(t, 1).ID(), testKey(t, 2).ID()
	slug, _ := AgentSlug(agent)
	path := w.path(ProfilesDir, slug)
	want := map[string]int{}
	for round := range 6 {
		tag := fmt.Sprintf("k%d", round)
		cmd := startChild(t, dir, agent, src, tag, 1_000_000)
		// Wait for the child to be writing, then kill it mid-stream.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if p, err := w.Profile(agent); err == nil && strings.Contains(fmt.Sprint(p.Signals), tag+"-") {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the child recorded nothing")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(round*7) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseProfile(data, slug)
		if err != nil {
			t.Fatalf("round %d: the profile does not load after a kill: %v", round, err)
		}
		want[tag] = -1
		checkWriters(t, p, want)
	}
	// The lock died with its holder: the next writer proceeds.
	if _, err := w.Record(agent, "", sig(src, 1, t0)); err != nil {
		t.Fatal(err)
	}
	if r, err := w.Validate(); err != nil || r.Errors() != 0 {
		t.Fatalf("%+v %v", r, err)
	}
}

// A write that fails before the rename (a crash, a full disk) leaves the
// old file as it was.
func TestFailedWriteKeepsOldFile(t *testing.T) {
	w := testWorkspace(t)
	agent, src := testKey(t, 1).ID(), testKey(t, 2).ID()
	p, err := w.Record(agent, "", sig(src, 0.9, t0))
	if err != nil {
		t.Fatal(err)
	}
	before := readWS(t, w, "reputation/"+p.Slug+".md")
	real := writeFile
	defer func() { writeFile = real }()
	writeFile = func(path string, data []byte) error {
		// Write half the new file to a temporary name, then "crash".
		f, err := os.CreateTemp(w.Dir(), ".partial-*")
		if err != nil {
			return err
		}
		f.Write(data[:len(data)/2])
		f.Close()
		return fmt.Errorf("crashed")
	}
	if _, err := w.Record(agent, "", sig(src, 0.1, t0)); err == nil {
		t.Fatal("no error")
	}
	if after := readWS(t, w, "reputation/"+p.Slug+".md"); after != before {
		t.Fatal("the old file changed")
	}
}
