package ldp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/timestamp"
)

var ctx = context.Background()

func signedSubmit(t *testing.T, key byte) []byte {
	t.Helper()
	e := submitEnvelope()
	if err := SignEd25519(e, testKey(key)); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(t *testing.T, b []byte) *Envelope {
	t.Helper()
	e, err := ParseEnvelope(b)
	if err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	return e
}

func TestEd25519SignVerify(t *testing.T) {
	b := signedSubmit(t, 1)
	e := parse(t, b)
	if e.SignatureAlgorithm != AlgEd25519 || e.Signer != testDID(1) {
		t.Fatalf("algorithm %q signer %q", e.SignatureAlgorithm, e.Signer)
	}
	v := &Verifier{Now: clock(t0)}
	got, err := v.Verify(ctx, e, testDID(1))
	if err != nil {
		t.Fatal(err)
	}
	if got.Algorithm != AlgEd25519 || got.Signer != testDID(1) || !got.Signed.Equal(t0) {
		t.Fatalf("verified as %+v", got)
	}
	// The signature is over the JCS form of the envelope as sent: the same
	// members in another order and spacing verify too.
	var members map[string]json.RawMessage
	json.Unmarshal(b, &members)
	names := make([]string, 0, len(members))
	for k := range members {
		names = append(names, k)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	var sb strings.Builder
	sb.WriteString("{ ")
	for i, k := range names {
		if i > 0 {
			sb.WriteString(" ,\n ")
		}
		fmt.Fprintf(&sb, "%q : %s", k, members[k])
	}
	sb.WriteString(" }")
	e2 := parse(t, []byte(sb.String()))
	if _, err := (&Verifier{Now: clock(t0)}).Verify(ctx, e2, ""); err != nil {
		t.Fatalf("reordered envelope: %v", err)
	}
}

// TestVerifyRefusals: each way an envelope can fail is its own error.
func TestVerifyRefusals(t *testing.T) {
	signed := signedSubmit(t, 1)
	hmacEnv := func(secret string) *Envelope {
		e := submitEnvelope()
		SignHMAC(e, secret)
		return roundTrip(t, e)
	}
	unsigned := roundTrip(t, submitEnvelope())
	algNoSig := submitEnvelope()
	algNoSig.SignatureAlgorithm = AlgHMACSHA256
	withTS := func(ts time.Time) *Envelope {
		e := submitEnvelope()
		e.Timestamp = timestamp.Format(ts)
		SignEd25519(e, testKey(1))
		return roundTrip(t, e)
	}
	cases := []struct {
		name   string
		v      *Verifier
		e      *Envelope
		signer string
		want   *Error
	}{
		{"unsigned", &Verifier{Now: clock(t0)}, unsigned, "", ErrUnsigned},
		{"unsigned with secret", &Verifier{HMACSecret: "s", Now: clock(t0)}, unsigned, "", ErrUnsigned},
		{"algorithm without signature", &Verifier{Now: clock(t0)}, algNoSig, "", ErrUnsigned},
		{"wrong key", &Verifier{Now: clock(t0)}, parse(t, signed), testDID(2), ErrWrongKey},
		{"wrong key as principal ID", &Verifier{Now: clock(t0)}, parse(t, signed), mustPrincipal(t, 2), ErrWrongKey},
		{"hmac where a key is required", &Verifier{HMACSecret: "s", Now: clock(t0)}, hmacEnv("s"), testDID(1), ErrWrongKey},
		{"hmac without a secret", &Verifier{Now: clock(t0)}, hmacEnv("s"), "", ErrAlgorithm},
		{"hmac when ed25519 is required", &Verifier{HMACSecret: "s", RequireEd25519: true, Now: clock(t0)}, hmacEnv("s"), "", ErrAlgorithm},
		{"hmac with another secret", &Verifier{HMACSecret: "s", Now: clock(t0)}, hmacEnv("t"), "", ErrTampered},
		{"stale", &Verifier{Now: clock(t0.Add(DefaultWindow + time.Second))}, parse(t, signed), "", ErrStale},
		{"stale by the verifier's window", &Verifier{Window: 10 * time.Second, Now: clock(t0.Add(11 * time.Second))}, parse(t, signed), "", ErrStale},
		{"from the future", &Verifier{Now: clock(t0)}, withTS(t0.Add(DefaultMaxAhead + time.Second)), "", ErrStale},
		{"hmac stale", &Verifier{HMACSecret: "s", Now: clock(t0.Add(time.Hour))}, hmacEnv("s"), "", ErrStale},
		{"signature not base64url", &Verifier{Now: clock(t0)}, parse(t, []byte(strings.Replace(string(signed), `"signature":"`, `"signature":"+/`, 1))), "", ErrMalformed},
		{"hmac signature in upper case", &Verifier{HMACSecret: "s", Now: clock(t0)}, func() *Envelope {
			e := hmacEnv("s")
			e.Signature = strings.ToUpper(e.Signature)
			return e
		}(), "", ErrMalformed},
		{"signer not a did:key", &Verifier{Now: clock(t0)}, parse(t, []byte(strings.Replace(string(signed), testDID(1), "did:web:example.com", 1))), "", ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.v.Verify(ctx, c.e, c.signer)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			for _, other := range []*Error{ErrMalformed, ErrUnsigned, ErrAlgorithm, ErrWrongKey, ErrTampered, ErrStale, ErrReplayed, ErrBusy} {
				if other != c.want && errors.Is(err, other) {
					t.Fatalf("err = %v is also %v", err, other)
				}
			}
		})
	}
}

func mustPrincipal(t *testing.T, n byte) string {
	t.Helper()
	return principalOf(testKey(n))
}

// leaves lists the path of every scalar in a JSON document.
func leaves(v any, path string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			leaves(x, path+"/"+k, out)
		}
	case []any:
		for i, x := range v {
			leaves(x, fmt.Sprintf("%s/%d", path, i), out)
		}
	default:
		*out = append(*out, path)
	}
}

// setLeaf replaces the scalar at path with a different value of the same
// kind that still parses.
func setLeaf(doc any, path string) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	cur := doc
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = changed(p, c[p])
				return
			}
			cur = c[p]
		case []any:
			var n int
			fmt.Sscan(p, &n)
			if last {
				c[n] = changed(p, c[n])
				return
			}
			cur = c[n]
		}
	}
}

func changed(name string, v any) any {
	switch v := v.(type) {
	case string:
		switch name {
		case "timestamp", "created_at", "deadline":
			return strings.Replace(v, "2026-03-09", "2026-03-10", 1)
		case "payload_mode":
			if v == string(ModeText) {
				return string(ModeSemanticFrame)
			}
			return string(ModeText)
		case "failure_policy":
			return FailOpen
		case "signer":
			return testDID(3)
		}
		return v + "x"
	case float64:
		if v == float64(int64(v)) {
			return v + 1
		}
		if v > 0.5 {
			return v - 0.01
		}
		return v + 1
	case bool:
		return !v
	}
	panic(fmt.Sprintf("no change for %T", v))
}

// TestEd25519TamperEveryMember changes each scalar of a signed TASK_SUBMIT
// with every optional member (input, contract, nonce, delegateos token) in
// turn, and adds and removes members: each change still parses, and each is
// refused as tampered (the signer, as signed by another key).
func TestEd25519TamperEveryMember(t *testing.T) {
	signed := signedSubmit(t, 1)
	var doc map[string]any
	json.Unmarshal(signed, &doc)
	var paths []string
	leaves(doc, "", &paths)
	sort.Strings(paths)
	tested := 0
	for _, p := range paths {
		// The signature itself, the algorithm (a change is a refused
		// algorithm, below), null (set below) and the body's type (no
		// other type has TASK_SUBMIT's members) are not scalars to change.
		if p == "/signature" || p == "/signature_algorithm" || p == "/body/type" || p == "/provenance" {
			continue
		}
		t.Run(p, func(t *testing.T) {
			var d map[string]any
			json.Unmarshal(signed, &d)
			setLeaf(d, p)
			b, _ := json.Marshal(d)
			e, err := ParseEnvelope(b)
			if err != nil {
				t.Fatalf("the tampered envelope does not parse, so this tests nothing: %v", err)
			}
			_, err = (&Verifier{Now: clock(t0)}).Verify(ctx, e, "")
			if !errors.Is(err, ErrTampered) {
				t.Fatalf("err = %v, want tampered", err)
			}
			if p == "/signer" {
				if _, err := (&Verifier{Now: clock(t0)}).Verify(ctx, e, testDID(1)); !errors.Is(err, ErrWrongKey) {
					t.Fatalf("with the signer required: err = %v, want wrong key", err)
				}
			}
		})
		tested++
	}
	if tested < 25 {
		t.Fatalf("only %d members tampered", tested)
	}
	for name, edit := range map[string]func(map[string]any){
		"nonce removed":      func(d map[string]any) { delete(d, "nonce") },
		"delegateos removed": func(d map[string]any) { delete(d, "delegateos") },
		"contract removed":   func(d map[string]any) { delete(d["body"].(map[string]any), "contract") },
		"provenance set": func(d map[string]any) {
			d["provenance"] = map[string]any{"produced_by": "x", "model_version": "y", "payload_mode_used": "text", "verified": true}
		},
		"input member added":  func(d map[string]any) { d["body"].(map[string]any)["input"].(map[string]any)["extra"] = 1 },
		"body null member":    func(d map[string]any) { d["body"].(map[string]any)["delegate_id"] = nil },
		"algorithm to hmac":   func(d map[string]any) { d["signature_algorithm"] = AlgHMACSHA256; delete(d, "signer") },
		"signature of other":  func(d map[string]any) { d["signature"] = parse(t, signedSubmit(t, 2)).Signature },
		"signature truncated": func(d map[string]any) { d["signature"] = d["signature"].(string)[:20] },
	} {
		t.Run(name, func(t *testing.T) {
			var d map[string]any
			json.Unmarshal(signed, &d)
			edit(d)
			b, _ := json.Marshal(d)
			e, err := ParseEnvelope(b)
			if err != nil {
				t.Fatal(err)
			}
			_, err = (&Verifier{Now: clock(t0)}).Verify(ctx, e, "")
			var le *Error
			if !errors.As(err, &le) || le.Reason == "" {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if name == "algorithm to hmac" {
				if !errors.Is(err, ErrAlgorithm) {
					t.Fatalf("err = %v", err)
				}
			} else if name == "signature truncated" {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v", err)
				}
			} else if !errors.Is(err, ErrTampered) {
				t.Fatalf("err = %v, want tampered", err)
			}
		})
	}
}

// TestHMACTamperEverySignedField changes each field of the reference's
// signing input, for every message type that adds one: each is refused as
// tampered.
func TestHMACTamperEverySignedField(t *testing.T) {
	bodies := []Body{
		&Hello{DelegateID: "ldp:delegate:a", SupportedModes: []PayloadMode{ModeText}},
		&SessionAccept{SessionID: "s-1", NegotiatedMode: ModeText},
		&SessionReject{Reason: "no"},
		&TaskSubmit{TaskID: "t-1", Skill: "echo", Input: json.RawMessage(`"hi"`)},
		&TaskUpdate{TaskID: "t-1"},
		&TaskResult{TaskID: "t-1", Output: json.RawMessage(`"ok"`), Provenance: Provenance{ProducedBy: "b", ModelVersion: "v", PayloadModeUsed: ModeText}},
		&TaskFailed{TaskID: "t-1", Error: LdpError{Code: "X", Category: "runtime", Message: "m", Severity: "error"}},
		&TaskCancel{TaskID: "t-1"},
	}
	fields := map[string]func(*Envelope){
		"from":          func(e *Envelope) { e.From += "x" },
		"to":            func(e *Envelope) { e.To += "x" },
		"session_id":    func(e *Envelope) { e.SessionID += "x" },
		"timestamp":     func(e *Envelope) { e.Timestamp = timestamp.Format(t0.Add(time.Second)) },
		"message_id":    func(e *Envelope) { e.MessageID += "x" },
		"nonce":         func(e *Envelope) { e.Nonce += "x" },
		"nonce removed": func(e *Envelope) { e.Nonce = "" },
		"type": func(e *Envelope) {
			if _, ok := e.Body.(*TaskCancel); ok {
				e.Body = &TaskUpdate{TaskID: TaskID(e.Body)}
			} else {
				e.Body = &TaskCancel{TaskID: "t-1"}
			}
		},
		"body key field": func(e *Envelope) {
			switch b := e.Body.(type) {
			case *Hello:
				b.DelegateID += "x"
			case *SessionAccept:
				b.SessionID += "x"
			case *SessionReject:
				b.Reason += "x"
			case *TaskSubmit:
				b.Skill += "x"
			case *TaskUpdate:
				b.TaskID += "x"
			case *TaskResult:
				b.TaskID += "x"
			case *TaskFailed:
				b.TaskID += "x"
			case *TaskCancel:
				b.TaskID += "x"
			}
		},
	}
	n := 0
	for _, body := range bodies {
		for name, tamper := range fields {
			t.Run(string(body.Type())+"/"+name, func(t *testing.T) {
				e := &Envelope{MessageID: "m-1", SessionID: "s-1", From: "ldp:delegate:a", To: "ldp:delegate:b",
					Body: body, PayloadMode: ModeText, Timestamp: timestamp.Format(t0), Nonce: "n-1"}
				SignHMAC(e, "secret")
				b, _ := json.Marshal(e)
				got := parse(t, b)
				tamper(got)
				b, _ = json.Marshal(got)
				got = parse(t, b)
				_, err := (&Verifier{HMACSecret: "secret", Now: clock(t0)}).Verify(ctx, got, "")
				if !errors.Is(err, ErrTampered) {
					t.Fatalf("err = %v, want tampered", err)
				}
			})
			n++
		}
	}
	if n != len(bodies)*len(fields) {
		t.Fatal("not every case ran")
	}
}

// TestHMACDoesNotCover documents, by test, what the reference's HMAC
// leaves out: a task's input, the payload mode, the provenance and the
// delegateos member can be changed under it. This is why the Ed25519
// profile exists and a delegate can require it.
func TestHMACDoesNotCover(t *testing.T) {
	for name, tamper := range map[string]func(*Envelope){
		"input": func(e *Envelope) {
			e.Body.(*TaskSubmit).Input = json.RawMessage(`{"task_type":"x","instruction":"rm -rf /"}`)
		},
		"contract":     func(e *Envelope) { e.Body.(*TaskSubmit).Contract = nil },
		"payload_mode": func(e *Envelope) { e.PayloadMode = ModeText },
		"delegateos":   func(e *Envelope) { e.DelegateOS.DCT = "another-token" },
	} {
		e := submitEnvelope()
		SignHMAC(e, "secret")
		got := roundTrip(t, e)
		tamper(got)
		got = roundTrip(t, got)
		if _, err := (&Verifier{HMACSecret: "secret", Now: clock(t0)}).Verify(ctx, got, ""); err != nil {
			t.Fatalf("%s: %v (if the reference's HMAC now covers it, update the docs)", name, err)
		}
	}
}

func TestReplay(t *testing.T) {
	v := &Verifier{HMACSecret: "secret", Now: clock(t0)}
	b := signedSubmit(t, 1)
	if _, err := v.Verify(ctx, parse(t, b), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, parse(t, b), ""); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	// Another message ID with the same nonce is a replay of the nonce.
	e := submitEnvelope()
	e.MessageID = "msg-other"
	SignEd25519(e, testKey(1))
	if _, err := v.Verify(ctx, roundTrip(t, e), ""); !errors.Is(err, ErrReplayed) || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("same nonce: %v", err)
	}
	// Another signer's envelope with the same IDs is its own.
	if _, err := v.Verify(ctx, parse(t, signedSubmit(t, 2)), ""); err != nil {
		t.Fatalf("another signer: %v", err)
	}
	// Without a nonce, the message_id alone is spent (the reference checks
	// only message_id+nonce pairs, and only when a nonce is present).
	e = submitEnvelope()
	e.Nonce = ""
	e.MessageID = "msg-no-nonce"
	SignHMAC(e, "secret")
	if _, err := v.Verify(ctx, roundTrip(t, e), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, roundTrip(t, e), ""); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay without nonce: %v", err)
	}
	// A refused envelope spends nothing: after a tampered copy, the real
	// one is accepted.
	e = submitEnvelope()
	e.MessageID, e.Nonce = "msg-fresh", "nonce-fresh"
	SignEd25519(e, testKey(1))
	bad := roundTrip(t, e)
	bad.To += "x"
	bad = roundTrip(t, bad)
	if _, err := v.Verify(ctx, bad, ""); !errors.Is(err, ErrTampered) {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, roundTrip(t, e), ""); err != nil {
		t.Fatalf("after a tampered copy: %v", err)
	}
	// Once the window has passed, a replay is stale, and the store forgets it.
	later := &Verifier{Now: clock(t0.Add(DefaultWindow + time.Millisecond)), Replay: v.Replay}
	if _, err := later.Verify(ctx, parse(t, b), ""); !errors.Is(err, ErrStale) {
		t.Fatalf("after the window: %v", err)
	}
}

// TestReplayBusy: a full store refuses rather than forgets a live entry
// (one signer may hold the whole of this one).
func TestReplayBusy(t *testing.T) {
	store := &MemoryReplay{Max: 4, MaxPerSigner: 4}
	now := t0
	v := &Verifier{Now: func() time.Time { return now }, Replay: store}
	send := func(id string) error {
		e := submitEnvelope()
		e.MessageID, e.Nonce = id, "n-"+id
		e.Timestamp = timestamp.Format(now)
		SignEd25519(e, testKey(1))
		_, err := v.Verify(ctx, roundTrip(t, e), "")
		return err
	}
	for _, id := range []string{"a", "b"} {
		if err := send(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := send("c"); !errors.Is(err, ErrBusy) {
		t.Fatalf("full store: %v", err)
	}
	if err := send("a"); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a replay in a full store: %v", err)
	}
	now = now.Add(DefaultWindow + time.Second)
	if err := send("c"); err != nil {
		t.Fatalf("after the entries expired: %v", err)
	}
	if store.Len() != 2 {
		t.Fatalf("store holds %d, want the 2 live ones", store.Len())
	}
}
