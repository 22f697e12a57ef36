package ratelimit

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var fileLimits = map[string]Limit{"p": {N: 3, Per: time.Minute}, "r": {N: 1, Per: time.Hour}}

func openFile(t *testing.T, path string, limits map[string]Limit, now time.Time) *Limiter {
	t.Helper()
	l, err := OpenFile(path, limits, now)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func reserve(t *testing.T, l *Limiter, now time.Time, keys ...Key) Admission {
	t.Helper()
	a, err := l.Reserve(keys, now)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func retryAfter(t *testing.T, l *Limiter, now time.Time, keys ...Key) time.Duration {
	t.Helper()
	_, err := l.Reserve(keys, now)
	var lim *LimitedError
	if !errors.As(err, &lim) {
		t.Fatalf("Reserve(%v) = %v; want limited", keys, err)
	}
	return lim.RetryAfter
}

// What a Limiter admitted is admitted still after Close and OpenFile: the
// windows go on where they were.
func TestFileSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates")
	l := openFile(t, path, fileLimits, t0)
	k := Key{"p", "root/9:del_a"}
	reserve(t, l, t0, Key{"r", "root"})
	for i := range 3 {
		reserve(t, l, t0.Add(time.Duration(i+1)*10*time.Second), k)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(35 * time.Second)
	l = openFile(t, path, fileLimits, now)
	defer l.Close()
	if got := retryAfter(t, l, now, k); got != 35*time.Second {
		t.Fatalf("after reopening, retry after %s; want 35s", got)
	}
	if got := retryAfter(t, l, now, Key{"r", "root"}); got != time.Hour-35*time.Second {
		t.Fatalf("after reopening, r: retry after %s", got)
	}
	reserve(t, l, now.Add(35*time.Second), k)
}

// A process that is killed closes nothing: the lines it appended are what
// the next one reads. (The file is copied while the first Limiter still
// holds it, which is what a killed process leaves.)
func TestFileWithoutClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rates")
	l := openFile(t, path, fileLimits, t0)
	k := Key{"p", "d"}
	reserve(t, l, t0, k)
	a := reserve(t, l, t0.Add(time.Second), k)
	reserve(t, l, t0.Add(2*time.Second), k)
	if err := l.Release(a); err != nil {
		t.Fatal(err)
	}
	reserve(t, l, t0.Add(3*time.Second), k)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	killed := filepath.Join(dir, "killed")
	if err := os.WriteFile(killed, data, 0o600); err != nil {
		t.Fatal(err)
	}
	l2 := openFile(t, killed, fileLimits, t0.Add(4*time.Second))
	defer l2.Close()
	if got := retryAfter(t, l2, t0.Add(4*time.Second), k); got != 56*time.Second {
		t.Fatalf("retry after %s; want 56s (the released call does not count)", got)
	}
	l.Close()
}

// A line torn by a crash is ignored; any other bad line keeps the file
// from opening, and the file is left as it was.
func TestFileTornAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rates")
	good := `{"at":[1700000000000000000],"keys":[["p","d"]]}` + "\n"
	if err := os.WriteFile(path, []byte(good+`{"at":[17000000`), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openFile(t, path, fileLimits, t0)
	defer l.Close()
	// The whole line counts, the torn one does not: p has room for two.
	reserve(t, l, t0, Key{"p", "d"})
	reserve(t, l, t0, Key{"p", "d"})
	retryAfter(t, l, t0, Key{"p", "d"})
	if data, _ := os.ReadFile(path); strings.Contains(string(data), `[17000000]`) || strings.Contains(string(data), "17000000`") {
		t.Fatalf("the torn line was kept:\n%s", data)
	}
}

func TestFileCorruptLine(t *testing.T) {
	for _, bad := range []string{
		`{"at":[],"keys":[["p","d"]]}`,
		`{"at":[1],"keys":[["p"]]}`,
		`{"at":[1],"keys":[["p","d"],["p","d"]]}`,
		`{"op":"release","at":[1,2],"keys":[["p","d"]]}`,
		`{"op":"reserve","at":[1],"keys":[["p","d"]]}`,
		`{"at":[-5],"keys":[["p","d"]]}`,
		`{"at":[1],"keys":[["p","d"]],"AT":[2]}`,
		`{"at":[1],"keys":[["","d"]]}`,
		`not json`,
		``,
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "rates")
		data := `{"at":[1700000000000000000],"keys":[["p","d"]]}` + "\n" + bad + "\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := OpenFile(path, fileLimits, t0)
		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: OpenFile = %v; want an error at line 2", bad, err)
		}
		if got, _ := os.ReadFile(path); string(got) != data {
			t.Errorf("%s: the corrupt file was changed to %q", bad, got)
		}
	}
}

// Opening keeps what still counts: a time later than now is taken as now,
// times outside their window and keys of limits no longer given are
// dropped, and the file is rewritten with what is left.
func TestFileOpenSettles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates")
	future := t0.Add(time.Hour).UnixNano()
	old := t0.Add(-2 * time.Minute).UnixNano()
	data := `{"at":[` + strconv.FormatInt(old, 10) + `,` + strconv.FormatInt(future, 10) + `],"keys":[["p","d"]]}` + "\n" +
		`{"at":[` + strconv.FormatInt(t0.UnixNano(), 10) + `],"keys":[["gone","d"],["r","d"]]}` + "\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openFile(t, path, fileLimits, t0)
	// p holds one call (the future one, as of t0): two more fit.
	reserve(t, l, t0.Add(time.Second), Key{"p", "d"})
	reserve(t, l, t0.Add(2*time.Second), Key{"p", "d"})
	if got := retryAfter(t, l, t0.Add(3*time.Second), Key{"p", "d"}); got != 57*time.Second {
		t.Fatalf("retry after %s; want 57s (the future call taken as made at t0)", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got); strings.Contains(s, "gone") || strings.Contains(s, strconv.FormatInt(old, 10)) || strings.Contains(s, strconv.FormatInt(future, 10)) {
		t.Fatalf("the rewritten file keeps what no longer counts:\n%s", s)
	}
}

// One file, one Limiter: a second OpenFile fails while the first holds
// it, and succeeds once it is closed.
func TestFileInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates")
	l := openFile(t, path, fileLimits, t0)
	if _, err := OpenFile(path, fileLimits, t0); !errors.Is(err, ErrInUse) {
		t.Fatalf("second OpenFile: %v; want ErrInUse", err)
	}
	l.Close()
	openFile(t, path, fileLimits, t0).Close()
}

// The file is rewritten as it grows, keeping only what counts.
func TestFileCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates")
	l := openFile(t, path, map[string]Limit{"p": {N: 10, Per: time.Second}}, t0)
	defer l.Close()
	for i := range 3 * compactLines {
		reserve(t, l, t0.Add(time.Duration(i)*100*time.Millisecond), Key{"p", "d"})
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > int64(compactLines*60) {
		t.Fatalf("the file holds %d bytes after %d admissions", fi.Size(), 3*compactLines)
	}
}

// An admission that cannot be written is refused and not counted, and the
// file is rewritten before anything is appended to it again.
func TestFileWriteFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates")
	l := openFile(t, path, fileLimits, t0)
	defer l.Close()
	l.file.log.Close() // the next append fails
	if _, err := l.Reserve([]Key{{"r", "d"}}, t0); err == nil || errors.Is(err, ErrLimited) {
		t.Fatalf("Reserve with an unwritable file: %v; want an error", err)
	}
	reserve(t, l, t0, Key{"r", "d"})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 1 {
		t.Fatalf("the file holds %d lines after one admission:\n%s", n, data)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openFile(t, path, fileLimits, t0)
	defer l2.Close()
	retryAfter(t, l2, t0, Key{"r", "d"})
}

// A Limiter's clock is its start's wall time plus the monotonic time
// since, so that a step of the wall clock neither frees nor blocks calls
// in the process; but the times it appends to the file are on that clock,
// and the next process reads them against the wall clock. Go's monotonic
// clock on Linux (CLOCK_MONOTONIC) stops while the machine is suspended,
// and does not follow a correction of the wall clock: after a laptop
// sleeps for an hour, or NTP moves a slow clock forward by an hour, every
// admission the proxy writes is an hour older than it is. An MCP client
// starts a proxy per session, and the next proxy finds those windows
// empty: N calls, a restart, and N more within the same minute.
//
// The hour is simulated by moving the Limiter's anchor back, which is
// exactly where a suspend leaves it (wall − monotonic grows by the time
// asleep).
// Found by the third red team (was TestRedteam3ClockBehindWallFreesWindowsAtRestart).
func TestFileClockBehindWallKeepsWindowsAtRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rates")
	limits := map[string]Limit{"p": {N: 2, Per: time.Minute}}
	k := Key{"p", "root/9:del_a"}
	l := openFile(t, path, limits, time.Now())
	// The machine slept for an hour after the proxy started.
	l.baseNano -= int64(time.Hour)
	reserve(t, l, time.Now(), k)
	reserve(t, l, time.Now(), k)
	if _, err := l.Reserve([]Key{k}, time.Now()); !errors.Is(err, ErrLimited) {
		t.Fatalf("a third call in the same minute: %v; want limited", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The client starts the proxy again at once.
	l2 := openFile(t, path, limits, time.Now())
	defer l2.Close()
	if _, err := l2.Reserve([]Key{k}, time.Now()); !errors.Is(err, ErrLimited) {
		t.Errorf("after a restart, a third call within a minute of two others was admitted (%v): the file dated them an hour back", err)
	}
}
