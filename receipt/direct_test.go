package receipt

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

// The writer's direct encoding of a decision or execution record is, byte
// for byte, what Encoder.Append writes of the record's body at the same
// position, over randomized records: every optional member present and
// absent, strings needing escapes, clipped texts, clear arguments and
// results too large or not UTF-8, times in any zone.
func TestDirectIsAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 24))
	var uuidSeed uint64
	// Both paths draw their UUIDs from the same replayed source.
	defer func(r func([]byte) (int, error)) { readRandom = r }(readRandom)
	replay := func() {
		src := rand.New(rand.NewPCG(uuidSeed, 1))
		readRandom = func(b []byte) (int, error) {
			for i := range b {
				b[i] = byte(src.Uint32())
			}
			return len(b), nil
		}
	}
	var e, ref Encoder
	for i := range 4000 {
		o, d, x := randomRecords(rng)
		if msg := compareDirect(&e, &ref, rng, o, d, x, replay, &uuidSeed); msg != "" {
			t.Fatalf("record %d: %s", i, msg)
		}
	}
}

// compareDirect writes d and x both ways at a random position and says
// how they differ ("" when they do not).
func compareDirect(e, ref *Encoder, rng *rand.Rand, o *Options, d *Decision, x *Execution, replay func(), uuidSeed *uint64) string {
	var prev [32]byte
	fill(rng, prev[:])
	seq := 1 + rng.Int64N(1<<40)
	omit := rng.IntN(4) == 0
	prefix := []byte("earlier\n")

	*uuidSeed = rng.Uint64()
	replay()
	got := e.AppendDecision(bytes.Clone(prefix), d, o, seq, &prev, omit)
	replay()
	b := d.Body(o)
	b.Position = Position{Seq: seq, Prev: hexString(prev)}
	if omit {
		OmitClear(b)
	}
	want, err := ref.Append(bytes.Clone(prefix), b)
	if err != nil {
		return err.Error()
	}
	if !bytes.Equal(got, want) {
		return "decision " + firstDiff(got, want)
	}
	if rng.IntN(3) > 0 {
		var digest [32]byte
		fill(rng, digest[:])
		d.Signed(digest)
	}
	*uuidSeed = rng.Uint64()
	replay()
	got = e.AppendExecution(bytes.Clone(prefix), x, o, seq+1, &prev, omit)
	replay()
	xb := x.Body(o)
	xb.Position = Position{Seq: seq + 1, Prev: hexString(prev)}
	if omit {
		OmitClear(xb)
	}
	if want, err = ref.Append(bytes.Clone(prefix), xb); err != nil {
		return err.Error()
	}
	if !bytes.Equal(got, want) {
		return "execution " + firstDiff(got, want)
	}
	return ""
}

// FuzzDirectIsAppend: whatever texts a request's sender chooses (method,
// target, capability, denial detail, arguments, result, outcome), the
// direct encoding is the reference's, byte for byte.
func FuzzDirectIsAppend(f *testing.F) {
	f.Add(uint64(1), "tools/call", "echo", "not granted", []byte(`{"text":"hi"}`), []byte(`{"content":[]}`), "result")
	f.Add(uint64(2), "a\"b", "\xff\u2028", "\u0001", []byte("\xff"), []byte(nil), "odd\n")
	f.Fuzz(func(t *testing.T, seed uint64, method, target, detail string, args, result []byte, outcome string) {
		rng := rand.New(rand.NewPCG(seed, 0))
		var uuidSeed uint64
		defer func(r func([]byte) (int, error)) { readRandom = r }(readRandom)
		replay := func() {
			src := rand.New(rand.NewPCG(uuidSeed, 1))
			readRandom = func(b []byte) (int, error) {
				for i := range b {
					b[i] = byte(src.Uint32())
				}
				return len(b), nil
			}
		}
		o, d, x := randomRecords(rng)
		d.Method, d.Target, d.DenialDetail, d.Arguments, x.Result, x.Outcome = method, target, detail, args, result, outcome
		if d.Requested != nil {
			d.Requested.Resource = target
		}
		var e, ref Encoder
		if msg := compareDirect(&e, &ref, rng, o, d, x, replay, &uuidSeed); msg != "" {
			t.Fatal(msg)
		}
	})
}

// firstDiff shows where got and want part.
func firstDiff(got, want []byte) string {
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	from := max(n-80, 0)
	return fmt.Sprintf("differ at byte %d:\n got …%q\nwant …%q", n, got[from:min(n+80, len(got))], want[from:min(n+80, len(want))])
}

func hexString(h [32]byte) string {
	const digits = "0123456789abcdef"
	var out [64]byte
	for i, c := range h {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out[:])
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// randomText is a string of the sorts a request's sender chooses: empty,
// plain, needing escapes, not UTF-8, or longer than MaxTextBytes.
func randomText(rng *rand.Rand) string {
	parts := []string{"", "echo", "a\"b\\c", "\u0001\n\t\u001f", "é😀", "\u2028<>&", "\xff\xfe", "/", " "}
	switch rng.IntN(8) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("é", MaxTextBytes/2+rng.IntN(8)) // clipped inside a rune
	}
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

func randomJSON(rng *rand.Rand) []byte {
	switch rng.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte("{\"bad\":\"\xff\"}")
	case 2:
		return []byte(`{"big":"` + strings.Repeat("x", MaxBytes) + `"}`)
	}
	return []byte(`{"text":` + `"` + strings.ReplaceAll(randomText(rng), `"`, `'`) + `"}`)
}

func randomTime(rng *rand.Rand) time.Time {
	if rng.IntN(10) == 0 {
		return time.Time{}
	}
	zone := time.FixedZone("z", (rng.IntN(27)-13)*3600)
	return time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zone)
}

// randomRecords is a decision and its execution with every member drawn
// at random, and options to write them with.
func randomRecords(rng *rand.Rand) (*Options, *Decision, *Execution) {
	o := &Options{PolicyHash: randomText(rng), IncludeArguments: rng.IntN(2) == 0, IncludeResults: rng.IntN(2) == 0}
	blocks := rng.IntN(4)
	ids := make([]string, blocks)
	for i := range ids {
		ids[i] = "rev-" + randomText(rng)
	}
	o.BlockIDs = func(string) []string { return ids }
	switch rng.IntN(3) {
	case 0:
		o.AgentDIDs = func(string) string { return "" }
	case 1:
		o.AgentDIDs = func(p string) string { return "did:key:z" + p }
	}
	methods := []string{"tools/call", "resources/read", "prompts/get", "completion/complete", "vendor/x.y", randomText(rng)}
	d := &Decision{
		Method: methods[rng.IntN(len(methods))], Target: randomText(rng), Token: "tok",
		Allowed: rng.IntN(2) == 0, Unauthenticated: rng.IntN(3) == 0, Enforced: rng.IntN(2) == 0, Waiting: rng.IntN(4) == 0,
		CostReserved: rng.Int64() - rng.Int64(), HasArguments: rng.IntN(2) == 0, Arguments: randomJSON(rng), At: randomTime(rng),
		ApprovalID: randomText(rng), ApprovalReceiptHash: randomText(rng),
	}
	fill(rng, d.Payload[:])
	fill(rng, d.ArgumentsHash[:])
	if rng.IntN(2) == 0 {
		d.DenialType, d.DenialDetail = randomText(rng), randomText(rng)
	}
	if rng.IntN(3) == 0 {
		d.AuditID = "urn:uuid:" + randomText(rng)
	}
	if rng.IntN(3) == 0 {
		d.PolicyHash = randomText(rng) // decided by a policy reloaded since
	}
	if rng.IntN(4) > 0 {
		d.Requested = &dct.Capability{Namespace: randomText(rng), Action: randomText(rng), Resource: randomText(rng)}
	}
	if rng.IntN(4) > 0 {
		d.Scope = &dct.AuthorizedScope{ContractID: randomText(rng), Delegatee: "p" + randomText(rng)}
		links := blocks
		if rng.IntN(4) == 0 {
			links = rng.IntN(4)
		}
		for range links {
			d.Scope.Chain = append(d.Scope.Chain, dct.ChainLink{DelegationID: randomText(rng)})
		}
	}
	outcomes := []string{"result", "error", "input required", "cancelled", "unanswered", randomText(rng)}
	x := &Execution{Decision: d, HasResponse: rng.IntN(3) > 0, Result: randomJSON(rng), CostCommitted: rng.Int64() - rng.Int64(),
		Started: randomTime(rng), Completed: randomTime(rng), Outcome: outcomes[rng.IntN(len(outcomes))]}
	fill(rng, x.Request[:])
	fill(rng, x.Response[:])
	return o, d, x
}
