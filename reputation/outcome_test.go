package reputation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTimelinessScore(t *testing.T) {
	created, deadline := t0, t0.Add(10*time.Hour)
	for _, c := range []struct {
		deadline, done time.Time
		want           float64
	}{
		{time.Time{}, t0.Add(1000 * time.Hour), 1},   // no deadline
		{deadline, t0.Add(9 * time.Hour), 1},         // early
		{deadline, deadline, 1},                      // on the dot
		{deadline, deadline.Add(2 * time.Hour), 0.8}, // 20% of the time allowed late
		{deadline, deadline.Add(30 * time.Hour), 0},  // very late
		{t0.Add(-time.Hour), t0.Add(time.Minute), 0}, // deadline before creation
		{t0, t0.Add(time.Nanosecond), 0},             // no time allowed
	} {
		if got := TimelinessScore(created, c.deadline, c.done); got != c.want {
			t.Errorf("deadline %v, done %v: %v, want %v", c.deadline, c.done, got, c.want)
		}
	}
}

// The path the proxy drives: a delegation completes, the linked contract
// is created, driven to evaluated, and the delegate's profile receives the
// signals.
func TestRecordOutcomeEvaluates(t *testing.T) {
	w := testWorkspace(t)
	boss, worker := testKey(t, 1), testKey(t, 2)
	done := t0.Add(2 * time.Hour)
	o := Outcome{
		DelegationID: "del_f7e8d9c0b1a2", TaskContractID: "ct_a1b2c3d4e5f6",
		Delegator: boss.ID(), Delegate: worker.ID(), Title: "Summarize the notes",
		Passed: true, VerificationScore: ptr(0.85),
		Created: t0, Deadline: t0.Add(time.Hour), CompletedAt: done,
		Completeness: ptr(0.9), Clarity: ptr(0.8),
	}
	c, signals, err := w.RecordOutcome(o, done)
	if err != nil {
		t.Fatal(err)
	}
	// Timeliness: one hour late of one allowed → 0. 0.3·0.9 + 0.4·0.85 + 0.2·0.8 + 0.1·0 = 0.77.
	if c.Slug != "del-f7e8d9c0b1a2" || c.Status != Evaluated || c.Result[Timeliness] != 0 || c.Result[Accuracy] != 0.85 {
		t.Fatalf("%+v", c)
	}
	if len(signals) != 1 || signals[0].Score != 0.77 || signals[0].Source != boss.DID() || signals[0].Evidence != "contract:del-f7e8d9c0b1a2" {
		t.Fatalf("%+v", signals)
	}
	if c.Delegator != boss.DID() || c.Delegate != worker.DID() || c.Link.DelegationID != o.DelegationID || c.Link.TaskContractID != o.TaskContractID {
		t.Fatalf("%+v %+v", c, c.Link)
	}
	p, err := w.Profile(worker.DID())
	if err != nil || p.Score(Reliability, done).Raw != 0.77 {
		t.Fatalf("%+v, %v", p, err)
	}
	text := readWS(t, w, "contracts/del-f7e8d9c0b1a2.md")
	if !strings.Contains(text, "delegateos:\n  delegationId: \"del_f7e8d9c0b1a2\"\n  taskContractId: \"ct_a1b2c3d4e5f6\"\n") {
		t.Fatalf("link not recorded:\n%s", text)
	}
	if r, err := w.Validate(); err != nil || len(r.Problems) != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	// A delegation is rated once.
	if _, _, err := w.RecordOutcome(o, done); !errors.Is(err, ErrTransition) {
		t.Fatalf("second outcome: %v", err)
	}
	if p2, _ := w.Profile(worker.DID()); len(p2.Signals) != 1 {
		t.Fatalf("second outcome added signals: %+v", p2.Signals)
	}
}

// Without defaults for completeness and clarity the contract waits,
// completed, for a person; evaluating then uses the measured scores.
func TestRecordOutcomeWaitsForAPerson(t *testing.T) {
	w := testWorkspace(t)
	boss, worker := testKey(t, 1), testKey(t, 2)
	c, signals, err := w.RecordOutcome(Outcome{DelegationID: "del_000000000001", Delegator: boss.DID(), Delegate: worker.DID(), Passed: false}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != Completed || signals != nil || c.Result != nil || c.Link.Measured[Accuracy] != 0 || c.Link.Measured[Timeliness] != 1 || len(c.Link.Measured) != 2 {
		t.Fatalf("%+v %+v", c, c.Link)
	}
	if c.Task.Description != "DelegateOS delegation del_000000000001" {
		t.Fatalf("%q", c.Task.Description)
	}
	if _, err := w.Profile(worker.DID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a profile before evaluation: %v", err)
	}
	// Only the criteria a person judges are needed now.
	if _, _, err := w.Evaluate(c.Slug, map[string]float64{Completeness: 1}, "", t0); !errors.Is(err, ErrEvaluation) {
		t.Fatalf("evaluated without clarity: %v", err)
	}
	c, signals, err = w.Evaluate(c.Slug, map[string]float64{Completeness: 0.5, Clarity: 0.5}, "", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// 0.3·0.5 + 0.4·0 + 0.2·0.5 + 0.1·1 = 0.35
	if c.Status != Evaluated || signals[0].Score != 0.35 {
		t.Fatalf("%+v %+v", c, signals)
	}
	// A person may overrule a measured score.
	c2, _, err := w.RecordOutcome(Outcome{DelegationID: "del_000000000002", Delegator: boss.DID(), Delegate: worker.DID(), Passed: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	_, signals, err = w.Evaluate(c2.Slug, map[string]float64{Completeness: 1, Clarity: 1, Accuracy: 0}, "", t0)
	if err != nil || signals[0].Score != 0.6 {
		t.Fatalf("%+v, %v", signals, err)
	}
}

// A contract someone created in advance for the delegation, with its own
// criteria, is the one the outcome completes.
func TestRecordOutcomeUsesPreparedContract(t *testing.T) {
	w := testWorkspace(t)
	boss, worker := testKey(t, 1), testKey(t, 2)
	c, err := w.CreateContract(ContractParams{
		Delegator: boss.ID(), Delegate: worker.ID(), DelegationID: "del_00000000000a",
		Task:     Task{Description: "Review the PR", OutputFormat: KnowledgeArtifact, Domain: "go"},
		Criteria: map[string]float64{Accuracy: 0.5, Timeliness: 0.5}, Created: t0,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Activate(c.Slug); err != nil {
		t.Fatal(err)
	}
	got, signals, err := w.RecordOutcome(Outcome{DelegationID: "del_00000000000a", Delegator: boss.ID(), Delegate: worker.ID(), Passed: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != Evaluated || len(signals) != 2 || signals[0].Score != 1 || signals[1].Domain != "go" || got.Task.Description != "Review the PR" {
		t.Fatalf("%+v %+v", got, signals)
	}
}

func TestRecordOutcomeConflicts(t *testing.T) {
	w := testWorkspace(t)
	boss, worker, other := testKey(t, 1), testKey(t, 2), testKey(t, 3)
	// A contract at the linked slug that is not linked.
	if _, err := w.CreateContract(ContractParams{Slug: "del-00000000000b", Delegator: boss.ID(), Delegate: worker.ID(), Task: Task{Description: "x"}, Created: t0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.RecordOutcome(Outcome{DelegationID: "del_00000000000b", Delegator: boss.ID(), Delegate: worker.ID(), Passed: true}, t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("unlinked contract: %v", err)
	}
	// The same delegation ID between other parties.
	o := Outcome{DelegationID: "del_00000000000c", Delegator: boss.ID(), Delegate: worker.ID(), Passed: true}
	if _, _, err := w.RecordOutcome(o, t0); err != nil {
		t.Fatal(err)
	}
	before := readWS(t, w, "contracts/del-00000000000c.md")
	for _, bad := range []Outcome{
		{DelegationID: o.DelegationID, Delegator: other.ID(), Delegate: worker.ID(), Passed: true},
		{DelegationID: o.DelegationID, Delegator: boss.ID(), Delegate: other.ID(), Passed: true},
	} {
		if _, _, err := w.RecordOutcome(bad, t0); !errors.Is(err, ErrConflict) {
			t.Fatalf("other parties: %v", err)
		}
	}
	if readWS(t, w, "contracts/del-00000000000c.md") != before {
		t.Fatal("a refused outcome changed the contract")
	}
	// A contract file claiming another delegation is refused at load.
	writeWS(t, w, "contracts/del-00000000000d.md", strings.Replace(before, "del_00000000000c", "del_00000000000e", 1))
	if _, _, err := w.RecordOutcome(Outcome{DelegationID: "del_00000000000d", Delegator: boss.ID(), Delegate: worker.ID()}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("mislinked file: %v", err)
	}
}

func TestRecordOutcomeRefusesBadInput(t *testing.T) {
	w := testWorkspace(t)
	boss, worker := testKey(t, 1).ID(), testKey(t, 2).ID()
	for name, o := range map[string]Outcome{
		"no delegation":      {Delegator: boss, Delegate: worker},
		"control characters": {DelegationID: "del\n1", Delegator: boss, Delegate: worker},
		"huge delegation ID": {DelegationID: strings.Repeat("d", MaxIDLen+1), Delegator: boss, Delegate: worker},
		"bad delegator":      {DelegationID: "del_1", Delegator: "boss", Delegate: worker},
		"other DID":          {DelegationID: "del_1", Delegator: boss, Delegate: "did:web:example.com"},
		"score above 1":      {DelegationID: "del_1", Delegator: boss, Delegate: worker, VerificationScore: ptr(1.5)},
		"NaN clarity":        {DelegationID: "del_1", Delegator: boss, Delegate: worker, Clarity: ptr(nan())},
	} {
		if _, _, err := w.RecordOutcome(o, t0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(w.Dir(), ContractsDir)); len(entries) > 1 {
		t.Fatalf("refused outcomes wrote files: %v", entries)
	}
}

// Hostile delegation IDs become safe file names.
func TestRecordOutcomeHostileDelegationIDs(t *testing.T) {
	w := testWorkspace(t)
	boss, worker := testKey(t, 1).ID(), testKey(t, 2).ID()
	for _, id := range []string{"../../etc/passwd", "del_/../../x", "DEL_0123456789AB", "del_0123456789ab/..", "..", "del_ 1", "dél_é"} {
		c, _, err := w.RecordOutcome(Outcome{DelegationID: id, Delegator: boss, Delegate: worker, Passed: true, Completeness: ptr(1.0), Clarity: ptr(1.0)}, t0)
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if !ValidSlug(c.Slug) || c.Link.DelegationID != id {
			t.Fatalf("%q: slug %q", id, c.Slug)
		}
		if _, err := os.Stat(filepath.Join(w.Dir(), ContractsDir, c.Slug+".md")); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(w.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("files outside contracts/ and reputation/: %v", entries)
	}
}

// An evaluation interrupted between the profile and the contract write
// leaves the contract completed; evaluating again completes it without
// recording its signals twice.
func TestInterruptedEvaluationIsNotCountedTwice(t *testing.T) {
	w := testWorkspace(t)
	c := newTestContract(t, w, "job", nil)
	mustStep(t, w, c.Slug)
	real := writeFile
	defer func() { writeFile = real }()
	writeFile = func(path string, data []byte) error {
		if strings.Contains(path, ContractsDir) {
			return errors.New("disk full")
		}
		return real(path, data)
	}
	if _, _, err := w.Evaluate(c.Slug, specScores, "", t0); err == nil {
		t.Fatal("no error from the failed write")
	}
	writeFile = real
	if got, _ := w.Contract(c.Slug); got.Status != Completed {
		t.Fatalf("status %s", got.Status)
	}
	if _, _, err := w.Evaluate(c.Slug, specScores, "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	p, err := w.Profile(testKey(t, 11).ID())
	if err != nil || len(p.Signals) != 1 || p.Dimensions[Reliability].SampleSize != 1 {
		t.Fatalf("%+v, %v", p, err)
	}
}
