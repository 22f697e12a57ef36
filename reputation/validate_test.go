package reputation

import (
	"strings"
	"testing"
)

// Validate names every problem with its file, errors and warnings, and
// checks the workspace as a whole.
func TestValidateWorkspace(t *testing.T) {
	w := testWorkspace(t)
	if r, err := w.Validate(); err != nil || len(r.Problems) != 0 || len(r.Files) != 0 {
		t.Fatalf("empty workspace: %+v %v", r, err)
	}
	a := testKey(t, 1)
	record(t, w, a.ID(), 2, 0.5, t0)
	slugA, _ := AgentSlug(a.ID())
	writeWS(t, w, "reputation/research-bot.md", specExampleA1)
	writeWS(t, w, "reputation/bad-score.md", strings.NewReplacer("research-bot", "bad-score", "score: 0.90\n    confidence", "score: 1.9\n    confidence").Replace(specExampleA1))
	writeWS(t, w, "reputation/Upper.md", specExampleA1)
	writeWS(t, w, "reputation/twin.md", strings.NewReplacer("research-bot", "twin").Replace(specExampleA1))
	writeWS(t, w, "reputation/miscount.md", strings.NewReplacer("research-bot", "miscount", "zResearchBot123", "zMiscount", "sampleSize: 1", "sampleSize: 5").Replace(specExampleA1))
	writeWS(t, w, "reputation/.lock", "")
	writeWS(t, w, "reputation/notes.txt", "ignored")
	writeWS(t, w, "contracts/draft-coverage-report.md", strings.Replace(foreignContract, "delegateSlug: scribe-bot", "delegateSlug: research-bot", 1))
	writeWS(t, w, "contracts/early-result.md", strings.NewReplacer("draft-coverage-report", "early-result", "status: completed", "status: active", "result: null", "result: {accuracy: 1}").Replace(foreignContract))
	writeWS(t, w, "contracts/heavy.md", strings.NewReplacer("draft-coverage-report", "heavy", "accuracy: 0.4", "accuracy: 0.5").Replace(foreignContract))
	c, _, err := w.RecordOutcome(Outcome{DelegationID: "del_000000000001", Delegator: testKey(t, 2).ID(), Delegate: a.ID(), Passed: true, Completeness: ptr(1.0), Clarity: ptr(1.0)}, t0)
	if err != nil {
		t.Fatal(err)
	}

	report, err := w.Validate()
	if err != nil {
		t.Fatal(err)
	}
	problems := report.Problems
	if len(report.Files) != 10 || report.Errors() != 5 || report.Warnings() != 5 {
		t.Errorf("%d files, %d errors, %d warnings", len(report.Files), report.Errors(), report.Warnings())
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"contracts/draft-coverage-report.md: delegateSlug: names reputation/research-bot.md, the profile of did:key:zResearchBot123, but the delegate is did:key:zScribeBotPlaceholder",
		"contracts/early-result.md:24: evaluation.result: must be null until the contract is evaluated (status is active)",
		"contracts/heavy.md:20: warning: evaluation.criteria: weights should sum to 1.0",
		"reputation/Upper.md: the file name is not a slug",
		"reputation/bad-score.md:11: dimensions.reliability.score: 1.9 is outside [0, 1]",
		"reputation/miscount.md: warning: dimensions.reliability.sampleSize: is 5, but the profile records 1 signals for it",
		"reputation/research-bot.md: warning: agentDid: did:key:zResearchBot123 is not an Ed25519 did:key",
		"reputation/twin.md: agentDid: did:key:zResearchBot123 also has a profile in reputation/research-bot.md",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing problem %q in\n%s", want, all)
		}
	}
	for _, clean := range []string{"reputation/" + slugA, "contracts/" + c.Slug, ".lock", "notes.txt"} {
		if strings.Contains(all, clean) {
			t.Errorf("problem reported for %s:\n%s", clean, all)
		}
	}
	for i := 1; i < len(problems); i++ {
		if problems[i-1].File > problems[i].File {
			t.Fatalf("not sorted by file:\n%s", all)
		}
	}
}
