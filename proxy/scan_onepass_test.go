package proxy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// upstreamTwoPass is how the relay read an upstream frame before the check
// for repeated members joined scanUpstream's pass: every member skipped,
// then params and the answer read again by the check. It is the reference
// the one pass is held to.
func upstreamTwoPass(b []byte) (h header, err, paramsErr, answerErr error) {
	h, err = scanMessage(b, true, true, true, false)
	return h, err, paramsRepeatsIn(h.params), answerRepeatsIn(h.answer, h.isError)
}

// sameUpstreamReading fails t unless scanUpstream and the checks after it
// read b exactly as upstreamTwoPass does: the same error, the same header
// (members, offsets, raw values) and the same verdict of both checks.
func sameUpstreamReading(t *testing.T, b []byte) {
	t.Helper()
	h0, err0, perr0, aerr0 := upstreamTwoPass(b)
	h1, err1 := scanUpstream(b)
	perr1, aerr1 := h1.paramsRepeats(), h1.answerRepeats()
	if err0 != err1 {
		t.Fatalf("%q: scan error %v, two passes %v", b, err1, err0)
	}
	same := func(x, y []byte) bool { return bytes.Equal(x, y) && (x == nil) == (y == nil) }
	if h0.kind != h1.kind || h0.method != h1.method || !same(h0.id, h1.id) || h0.isError != h1.isError ||
		!same(h0.params, h1.params) || h0.idAt != h1.idAt || h0.paramsAt != h1.paramsAt || !same(h0.answer, h1.answer) {
		t.Fatalf("%q: header %+v, two passes %+v", b, h1, h0)
	}
	if h0.paramsClean || h0.answerClean {
		t.Fatalf("%q: the reference marked a value clean", b)
	}
	if fmt.Sprint(perr0) != fmt.Sprint(perr1) || fmt.Sprint(aerr0) != fmt.Sprint(aerr1) {
		t.Fatalf("%q: checks say %v / %v, two passes %v / %v", b, perr1, aerr1, perr0, aerr0)
	}
	// Clean means what the check would have said.
	if h1.answerClean {
		if _, found, tooDeep := repeatedMember(h1.answer); found || tooDeep {
			t.Fatalf("%q: answer marked clean, the check finds found=%v tooDeep=%v", b, found, tooDeep)
		}
	}
	if h1.paramsClean {
		if _, found, tooDeep := repeatedMember(h1.params); found || tooDeep {
			t.Fatalf("%q: params marked clean, the check finds found=%v tooDeep=%v", b, found, tooDeep)
		}
	}
}

// upstreamSeeds are upstream frames of every shape the checks tell apart:
// clean, a member twice (at the top, nested, escaped), nested too deep,
// values that are not well formed (where bracket counting and a strict
// reading part ways), and frames the scan itself refuses.
func upstreamSeeds() []string {
	deep := strings.Repeat("[", maxNesting+2) + strings.Repeat("]", maxNesting+2)
	deepObj := strings.Repeat(`{"a":`, maxNesting+1) + "1" + strings.Repeat("}", maxNesting+1)
	edge := strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting)
	return []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello, proxy"}],"isError":false}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"ok","text":"no"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":1,"\u0061":2}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":1,"A":2}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","message":"y"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","data":[{"k":1},{"k":1,"k":2}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":` + deep + `}`,
		`{"jsonrpc":"2.0","id":1,"result":` + deepObj + `}`,
		`{"jsonrpc":"2.0","id":1,"result":` + edge + `}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","level":"debug"}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":` + deep + `}`,
		`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"maxTokens":1,"maxTokens":9999}}`,
		`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"ok"}}`,
		`{"jsonrpc":"2.0","id":1,"result":[tr{ue]}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":1]}`,
		`{"jsonrpc":"2.0","id":1,"result":[a"b]",1]}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a" 1}}`,
		`{"jsonrpc":"2.0","id":1,"result":[1 2]}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2]}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":[1,{"b":2,"b":3}],"c":x}}`,
		`{"jsonrpc":"2.0","id":1,"result":01}`,
		`{"jsonrpc":"2.0","id":1,"result":"s"}`,
		`{"jsonrpc":"2.0","id":1,"result":null,"id":2}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1}}`,
		`{"jsonrpc":"2.0","id":1,"error":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"Result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"x":"\ud800"},"params":{"p":1,"p":1}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"\ud800":1,"\udfff":2}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"\xff\":1,\"\xfe\":2}}",
		`{"jsonrpc":"2.0","id":1,"result":{"a":1} `,
		`{"jsonrpc":"2.0","id":1,"result":{"a":"\"}"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":"unterminated}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":1}}}`,
		`{"id":1,"result":1e400}`,
		`[]`, `{}`, ``, `{"id":1,"result":`,
	}
}

// TestUpstreamOnePass: the one-pass reading of upstream frames agrees with
// the two passes it replaced on the seeds and on frames made from them by
// random cuts, splices and byte changes (a fixed seed: the same inputs
// every run).
func TestUpstreamOnePass(t *testing.T) {
	seeds := upstreamSeeds()
	for _, s := range seeds {
		sameUpstreamReading(t, []byte(s))
	}
	r := rand.New(rand.NewPCG(20, 1))
	alphabet := []byte(`{}[]",:\ 01a-eEtrufnl` + "\x00\xff")
	for range 200000 {
		b := []byte(seeds[r.IntN(len(seeds))])
		for n := r.IntN(4); n >= 0 && len(b) > 0; n-- {
			i := r.IntN(len(b))
			switch r.IntN(4) {
			case 0:
				b[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				b = append(b[:i:i], b[i+1:]...)
			case 2:
				b = append(b[:i:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
			default:
				o := []byte(seeds[r.IntN(len(seeds))])
				j := r.IntN(len(o) + 1)
				b = append(b[:i:i], o[j:]...)
			}
		}
		sameUpstreamReading(t, b)
	}
}

// FuzzUpstreamOnePass is TestUpstreamOnePass's comparison on fuzzed frames:
// the check for repeated members made during the scan refuses, passes and
// names exactly what the scan followed by the check did.
func FuzzUpstreamOnePass(f *testing.F) {
	for _, s := range upstreamSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameUpstreamReading(t, b) })
}

// BenchmarkUpstreamAnswer is reading an upstream answer as serverFrame
// does (scanUpstream, then the check for repeated members), for the bench's
// small result and for a result of 64 text items (~5 KiB).
func BenchmarkUpstreamAnswer(b *testing.B) {
	small := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"hello, proxy"}],"isError":false}}`)
	var big bytes.Buffer
	big.WriteString(`{"jsonrpc":"2.0","id":12345,"result":{"content":[`)
	for i := range 64 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"type":"text","text":"line %d of a longer answer, with some words in it"}`, i)
	}
	big.WriteString(`],"isError":false}}`)
	for _, c := range []struct {
		name  string
		frame []byte
	}{{"small", small}, {"5KiB", big.Bytes()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.frame)))
			b.ReportAllocs()
			for b.Loop() {
				h, err := scanUpstream(c.frame)
				if err != nil || h.answerRepeats() != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
