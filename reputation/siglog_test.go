package reputation

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logged sets up a profile large enough for the signal log, of n signals.
func logged(t *testing.T, n int) (w *Workspace, agent, src, slug string) {
	t.Helper()
	w = testWorkspace(t)
	a, s := testKey(t, 1), testKey(t, 2)
	slug = bigProfile(t, w, a.DID(), s.DID(), n)
	if fi, err := os.Stat(w.path(ProfilesDir, slug)); err != nil || fi.Size() < logMinProfile {
		t.Fatalf("the profile is too small for the log: %v", err)
	}
	return w, a.ID(), s.ID(), slug
}

func rec1(t *testing.T, w *Workspace, agent, src string, score float64, at time.Time) *Profile {
	t.Helper()
	p, err := w.Record(agent, "", sig(src, score, at))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Signals recorded into a large profile go to its log, leave the profile
// file as it was, and read back with it.
func TestSignalLogAppends(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	before := readWS(t, w, "reputation/"+slug+".md")
	if p := rec1(t, w, agent, src, 1, t0.Add(time.Hour)); len(p.Signals) != 401 {
		t.Fatalf("%d signals", len(p.Signals))
	}
	want := rec1(t, w, agent, src, 0, t0.Add(2*time.Hour))
	// A profile Record returned does not change with later records.
	later := rec1(t, w, agent, src, 1, t0.Add(3*time.Hour))
	if len(want.Signals) != 402 || want.Dimensions[Reliability].SampleSize != 402 || len(later.Signals) != 403 {
		t.Fatalf("an earlier result changed: %d signals, sample size %d", len(want.Signals), want.Dimensions[Reliability].SampleSize)
	}
	want.Signals = append(want.Signals, sig(src, 0.5, t0))
	if later.Signals[402].Score != 1 {
		t.Fatal("appending to a returned profile wrote into the next one")
	}
	if readWS(t, w, "reputation/"+slug+".md") != before {
		t.Fatal("the profile file was rewritten")
	}
	if lines := strings.Count(readWS(t, w, "reputation/"+slug+signalLogSuffix), "\n"); lines != 3 {
		t.Fatalf("the log holds %d lines", lines)
	}
	got, err := w.Profile(agent)
	if err != nil {
		t.Fatal(err)
	}
	if !sameProfile(got, later) || len(got.Signals) != 403 || got.Dimensions[Reliability].SampleSize != 403 {
		t.Fatalf("read back %d signals, sample size %d", len(got.Signals), got.Dimensions[Reliability].SampleSize)
	}
	// Trust's cache sees the log grow.
	tv, err := w.Trust(agent, t0.Add(3*time.Hour))
	if err != nil || tv.SampleSize != 403 {
		t.Fatalf("trust: %+v %v", tv, err)
	}
	rec1(t, w, agent, src, 1, t0.Add(4*time.Hour))
	if tv, err = w.Trust(agent, t0.Add(4*time.Hour)); err != nil || tv.SampleSize != 404 {
		t.Fatalf("trust after a third signal: %+v %v", tv, err)
	}
}

// When the log is full, the next signal folds it into the profile file,
// which then holds every signal, and the log is removed.
func TestSignalLogCompacts(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	var want *Profile
	for i := range logMaxEntries {
		want = rec1(t, w, agent, src, float64(i%2), t0.Add(time.Duration(i+1)*time.Hour))
	}
	if _, err := os.Stat(w.path(ProfilesDir, slug) + ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.logPath(slug)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the log is still there: %v", err)
	}
	data := []byte(readWS(t, w, "reputation/"+slug+".md"))
	p, err := ParseProfile(data, slug)
	if err != nil {
		t.Fatal(err)
	}
	if !sameProfile(p, want) || len(p.Signals) != 400+logMaxEntries {
		t.Fatalf("the profile file holds %d signals", len(p.Signals))
	}
}

// A crash can leave a half-written last line (never acknowledged) and a
// log whose signals a compaction already wrote into the profile file.
// Neither loses nor doubles a signal.
func TestSignalLogCrashes(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	rec1(t, w, agent, src, 1, t0.Add(time.Hour))
	logPath := w.logPath(slug)
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"n":401,"source":"did:key:z6Mk`)
	f.Close()
	if p, err := w.Profile(agent); err != nil || len(p.Signals) != 401 {
		t.Fatalf("with a torn line: %v", err)
	}
	rec1(t, w, agent, src, 0, t0.Add(2*time.Hour))
	text := readWS(t, w, "reputation/"+slug+signalLogSuffix)
	if strings.Count(text, "\n") != 2 || !strings.HasSuffix(text, "}\n") || strings.Contains(text, `z6Mk{`) {
		t.Fatalf("the torn line was not cut off:\n%s", text)
	}

	// Keep the log, fill it until it is folded, then put it back as a
	// crash before its removal would have left it.
	kept := readWS(t, w, "reputation/"+slug+signalLogSuffix)
	for i := 2; i < logMaxEntries; i++ {
		rec1(t, w, agent, src, 1, t0.Add(time.Duration(i+1)*time.Hour))
	}
	if _, err := os.Stat(logPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("no compaction")
	}
	writeWS(t, w, "reputation/"+slug+signalLogSuffix, kept)
	p, err := w.Profile(agent)
	if err != nil || len(p.Signals) != 400+logMaxEntries {
		t.Fatalf("a folded log was applied again: %d signals, %v", len(p.Signals), err)
	}
	p = rec1(t, w, agent, src, 1, t0.Add(1000*time.Hour))
	if len(p.Signals) != 400+logMaxEntries+1 {
		t.Fatalf("%d signals", len(p.Signals))
	}
	if text := readWS(t, w, "reputation/"+slug+signalLogSuffix); strings.Count(text, "\n") != 1 {
		t.Fatalf("the folded log was not replaced:\n%s", text)
	}
	if again, err := w.Profile(agent); err != nil || !sameProfile(again, p) {
		t.Fatalf("read back: %v", err)
	}
}

// A profile file that another tool appended to keeps the log's signals:
// they follow the file's, and the next signal folds them in.
func TestSignalLogAfterForeignAppend(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	rec1(t, w, agent, src, 1, t0.Add(time.Hour))
	name := "reputation/" + slug + ".md"
	text := readWS(t, w, name)
	foreign := "  - source: \"did:web:example.com\"\n    dimension: \"reliability\"\n    score: 0.5\n    timestamp: \"2026-02-16T00:00:00.000Z\"\n---\n"
	writeWS(t, w, name, strings.Replace(text, "\n---\n", "\n"+foreign, 1))
	p, err := w.Profile(agent)
	if err != nil || len(p.Signals) != 402 || p.Signals[400].Source != "did:web:example.com" || p.Signals[401].Score != 1 {
		t.Fatalf("%v", err)
	}
	p = rec1(t, w, agent, src, 0, t0.Add(2*time.Hour))
	if _, err := os.Stat(w.logPath(slug)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the log was not folded")
	}
	back, err := w.Profile(agent)
	if err != nil || len(back.Signals) != 403 || !sameProfile(back, p) {
		t.Fatalf("%v", err)
	}
}

// A log line that is whole but wrong is an error naming the file and line.
func TestSignalLogInvalid(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	rec1(t, w, agent, src, 1, t0.Add(time.Hour))
	good := readWS(t, w, "reputation/"+slug+signalLogSuffix)
	for name, text := range map[string]string{
		"not JSON":      good + "{\n",
		"unknown field": good + strings.Replace(good, `{"n":400`, `{"x":1,"n":401`, 1),
		"bad score":     good + strings.Replace(strings.Replace(good, `"score":1`, `"score":2`, 1), `"n":400`, `"n":401`, 1),
		"gap":           good + strings.Replace(good, `"n":400`, `"n":405`, 1),
		"bad source":    good + strings.Replace(strings.Replace(good, `"source":"did:key:`, `"source":"key:`, 1), `"n":400`, `"n":401`, 1),
	} {
		writeWS(t, w, "reputation/"+slug+signalLogSuffix, text)
		_, err := w.Profile(agent)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), slug+signalLogSuffix) || !strings.Contains(err.Error(), ":2") {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := w.Record(agent, "", sig(src, 1, t0)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: recorded into a profile with a broken log: %v", name, err)
		}
	}
}

// workspace validate reads the log with its profile and names a broken
// line.
func TestSignalLogValidate(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	rec1(t, w, agent, src, 1, t0.Add(time.Hour))
	r, err := w.Validate()
	if err != nil || len(r.Problems) != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	writeWS(t, w, "reputation/"+slug+signalLogSuffix, readWS(t, w, "reputation/"+slug+signalLogSuffix)+"{\"n\":\n")
	r, err = w.Validate()
	if err != nil || len(r.Problems) != 1 || r.Problems[0].File != "reputation/"+slug+signalLogSuffix || r.Problems[0].Line != 2 {
		t.Fatalf("%+v %v", r, err)
	}
}

// Two processes recording into a large profile at once, across a
// compaction, lose and double nothing, and a reader meanwhile never sees
// signals disappear.
func TestSignalLogConcurrentProcesses(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	const each = 150
	a := startChild(t, w.Dir(), agent, src, "a", each)
	b := startChild(t, w.Dir(), agent, src, "b", each)
	done := make(chan error, 2)
	go func() { done <- a.Wait() }()
	go func() { done <- b.Wait() }()
	seen, finished := 400, 0
	for finished < 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished++
		default:
		}
		p, err := w.Profile(agent)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Signals) < seen {
			t.Fatalf("a reader saw %d signals after %d", len(p.Signals), seen)
		}
		seen = len(p.Signals)
		time.Sleep(time.Millisecond)
	}
	p, err := w.Profile(agent)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Signals) != 400+2*each || p.Dimensions[Reliability].SampleSize != len(p.Signals) {
		t.Fatalf("%d signals, sample size %d", len(p.Signals), p.Dimensions[Reliability].SampleSize)
	}
	last := map[string]int{"a": -1, "b": -1}
	for _, s := range p.Signals[400:] {
		tag, num, _ := strings.Cut(s.Message, "-")
		i, err := strconv.Atoi(num)
		if err != nil || i != last[tag]+1 {
			t.Fatalf("writer %s: signal %q after %d", tag, s.Message, last[tag])
		}
		last[tag] = i
	}
	if data, err := os.ReadFile(w.path(ProfilesDir, slug)); err != nil || bytes.Count(data, []byte("\n  - ")) < 400+logMaxEntries {
		t.Fatalf("no compaction happened: %v", err)
	}
}

// A signal log whose profile file is gone is reported.
func TestSignalLogOrphan(t *testing.T) {
	w, agent, src, slug := logged(t, 400)
	rec1(t, w, agent, src, 1, t0.Add(time.Hour))
	if err := os.Remove(w.path(ProfilesDir, slug)); err != nil {
		t.Fatal(err)
	}
	r, err := w.Validate()
	if err != nil || len(r.Problems) != 1 || r.Problems[0].File != "reputation/"+slug+signalLogSuffix || r.Problems[0].Severity != SeverityWarning {
		t.Fatalf("%+v %v", r, err)
	}
	// A new profile at that slug does not take the old log's signals.
	if p := rec1(t, w, agent, src, 1, t0.Add(2*time.Hour)); len(p.Signals) != 1 {
		t.Fatalf("%d signals", len(p.Signals))
	}
	if p, err := w.Profile(agent); err != nil || len(p.Signals) != 1 {
		t.Fatalf("%v", err)
	}
}

// FuzzParseSignalLog: reading a signal log never panics, and what it
// accepts writes back to the same entries.
func FuzzParseSignalLog(f *testing.F) {
	f.Add([]byte(`{"n":400,"source":"did:key:z6Mko9hTggMwjSTEaJaPUfE6tqcy2xvU6BnNq3e3o8qVBiyH","dimension":"reliability","score":1,"timestamp":"2026-02-15T11:30:00.000Z"}` + "\n"))
	f.Add([]byte(`{"n":0,"source":"did:web:x","dimension":"domain-competence","domain":"law","score":0.5,"timestamp":"2026-02-15T11:30:00Z","evidence":"e","message":"m\n"}` + "\n" + `{"n":1,"sour`))
	f.Add([]byte(`{"n":1,"Source":"did:a:b","source":"did:a:b"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parseSignalLog(data, "reputation/x"+signalLogSuffix)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error that is not ErrInvalid: %v", err)
			}
			return
		}
		if l.size > int64(len(data)) || l.torn != (l.size < int64(len(data))) {
			t.Fatalf("size %d torn %v of %d bytes", l.size, l.torn, len(data))
		}
		w := &Workspace{dir: t.TempDir()}
		if err := os.MkdirAll(filepath.Join(w.dir, ProfilesDir), 0o700); err != nil {
			t.Fatal(err)
		}
		var signals []Signal
		for _, e := range l.entries {
			signals = append(signals, e.s)
		}
		if len(signals) == 0 {
			return
		}
		if err := w.appendSignalLog("x", &signalLog{}, l.entries[0].n, signals); err != nil {
			t.Fatal(err)
		}
		back, err := w.readSignalLog("x")
		if err != nil || len(back.entries) != len(l.entries) {
			t.Fatalf("written back: %v", err)
		}
		for i := range back.entries {
			if back.entries[i].n != l.entries[i].n || !sameSignal(back.entries[i].s, l.entries[i].s) {
				t.Fatalf("entry %d read back as %+v, want %+v", i, back.entries[i], l.entries[i])
			}
		}
	})
}
