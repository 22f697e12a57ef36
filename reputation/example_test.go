package reputation_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/reputation"
)

func key(seed byte) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{seed}, 32), "")
	if err != nil {
		log.Fatal(err)
	}
	return k
}

// A workspace records signals about an agent; scores are read with decay
// applied as of the time asked for.
func Example() {
	dir, _ := os.MkdirTemp("", "rdp-example")
	defer os.RemoveAll(dir)
	ws, err := reputation.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	bot, me := key(1), key(2)
	at := time.Date(2026, 2, 15, 10, 30, 0, 0, time.UTC)
	_, err = ws.Record(bot.ID(), "ResearchBot", reputation.Signal{
		Source: me.ID(), Dimension: reputation.Reliability, Score: 0.95, Timestamp: at,
		Message: "Completed first task successfully",
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := ws.Profile(bot.DID())
	if err != nil {
		log.Fatal(err)
	}
	for _, months := range []int{0, 12, 36} {
		v := p.Score(reputation.Reliability, at.Add(time.Duration(months)*reputation.Month))
		fmt.Printf("after %2d months: %.2f (confidence %.2f, %d signal)\n", months, v.Score, v.Confidence, v.SampleSize)
	}
	fmt.Println("coordination known:", p.Score(reputation.Coordination, at).Known)
	// Output:
	// after  0 months: 0.95 (confidence 0.09, 1 signal)
	// after 12 months: 0.75 (confidence 0.09, 1 signal)
	// after 36 months: 0.50 (confidence 0.09, 1 signal)
	// coordination known: false
}

// The evaluation example of the spec's Appendix A.2.
func ExampleWeightedScore() {
	score, err := reputation.WeightedScore(
		map[string]float64{"completeness": 0.3, "accuracy": 0.4, "clarity": 0.2, "timeliness": 0.1},
		map[string]float64{"completeness": 0.90, "accuracy": 0.85, "clarity": 0.80, "timeliness": 1.00},
	)
	fmt.Println(score, err)
	// Output: 0.87 <nil>
}

// A contract goes through its lifecycle; evaluating it records a
// reliability signal for the delegate.
func ExampleWorkspace_Evaluate() {
	dir, _ := os.MkdirTemp("", "rdp-example")
	defer os.RemoveAll(dir)
	ws, _ := reputation.Open(dir)
	at := time.Date(2026, 2, 15, 10, 30, 0, 0, time.UTC)
	c, err := ws.CreateContract(reputation.ContractParams{
		Slug: "q3-research", Delegator: key(1).ID(), Delegate: key(2).ID(),
		Task: reputation.Task{Description: "Research Q3 trends"}, Created: at,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.ID(), c.Status)
	if _, err := ws.Complete(c.Slug); err != nil {
		fmt.Println(err)
	}
	ws.Activate(c.Slug)
	ws.Complete(c.Slug)
	c, signals, err := ws.Evaluate(c.Slug, map[string]float64{"completeness": 0.9, "accuracy": 0.85, "clarity": 0.8, "timeliness": 1}, "", at)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Status, signals[0].Dimension, signals[0].Score, signals[0].Evidence)
	// Output:
	// contract:q3-research draft
	// contract:q3-research is draft; it must be active to become completed (draft → active → completed → evaluated)
	// evaluated reliability 0.87 contract:q3-research
}

// The proxy records how a delegation ended; the linked contract is created
// and evaluated, and a trust gate reads the delegate's reliability.
func ExampleWorkspace_RecordOutcome() {
	dir, _ := os.MkdirTemp("", "rdp-example")
	defer os.RemoveAll(dir)
	ws, _ := reputation.Open(dir)
	at := time.Date(2026, 2, 15, 10, 30, 0, 0, time.UTC)
	boss, worker := key(1), key(2)
	gate := reputation.TrustGate{MinReliability: 0.6, MinConfidence: 0.3}

	v, _ := ws.Trust(worker.ID(), at)
	fmt.Println(gate.Allow(v))

	for i := range 5 {
		c, signals, err := ws.RecordOutcome(reputation.Outcome{
			DelegationID: fmt.Sprintf("del_00000000000%d", i), Delegator: boss.ID(), Delegate: worker.ID(),
			Passed: false, VerificationScore: new(0.2),
			Completeness: new(0.5), Clarity: new(0.5),
		}, at)
		if err != nil {
			log.Fatal(err)
		}
		if i == 0 {
			fmt.Println(c.ID(), c.Status, signals[0].Score)
		}
	}
	v, _ = ws.Trust(worker.ID(), at)
	fmt.Println(gate.Allow(v))
	// Output:
	// true no reliability signals yet: unknown, not untrusted
	// contract:del-000000000000 evaluated 0.43
	// false reliability 0.43 is below the required 0.60 (confidence 0.33 from 5 signals)
}
