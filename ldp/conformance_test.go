package ldp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestConformance is the §10 list, item by item, against a Responder
// served by Handler on loopback HTTP and driven by a Client.
func TestConformance(t *testing.T) {
	d := newDelegate(t, 1, "")
	c := newClient(2)
	open := func(t *testing.T, cfg SessionConfig) *ClientSession {
		t.Helper()
		s, err := c.Open(ctx, d.srv.URL, "ldp:delegate:echo", cfg, nil, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("MUST 1: identity card at /.well-known/ldp-identity", func(t *testing.T) {
		resp, err := http.Get(d.srv.URL + "/.well-known/ldp-identity")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s %v", resp.Status, err)
		}
		for _, m := range cardRequired {
			if _, ok := raw[m]; !ok {
				t.Errorf("required member %s missing", m)
			}
		}
		if _, err := c.Discover(ctx, d.srv.URL); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MUST 2: Mode 0 (text)", func(t *testing.T) {
		s := open(t, SessionConfig{PreferredPayloadModes: []PayloadMode{ModeText}})
		if s.Payload.Mode != ModeText {
			t.Fatalf("negotiated %s", s.Payload.Mode)
		}
		reply, err := s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"plain text"`)}, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := reply.Body.(*TaskResult); !ok || r.Provenance.PayloadModeUsed != ModeText {
			t.Fatalf("%+v", reply.Body)
		}
	})
	t.Run("MUST 3: provenance in every TASK_RESULT", func(t *testing.T) {
		s := open(t, SessionConfig{})
		for i, in := range []string{`"a"`, `{"task_type":"x","instruction":"y"}`} {
			mode := ModeText
			if i == 1 {
				mode = ModeSemanticFrame
			}
			reply, err := s.Submit(ctx, &TaskSubmit{TaskID: "t" + in[:2], Skill: "echo", Input: json.RawMessage(in)}, mode, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := reply.Body.(*TaskResult)
			p := r.Provenance
			if p.ProducedBy == "" || p.ModelVersion == "" || p.PayloadModeUsed != mode || p.SessionID != s.ID || p.Timestamp == "" || reply.Provenance == nil {
				t.Fatalf("provenance %+v", p)
			}
		}
	})
	t.Run("MUST 4: trust domains checked before SESSION_ACCEPT", func(t *testing.T) {
		for cfg, code := range map[string]string{"finance.internal": CodeTrustDomainMismatch, "": CodeUntrustedPeer} {
			cl := newClient(3)
			cl.TrustDomain = "stranger.org"
			_, err := cl.Open(ctx, d.srv.URL, "ldp:delegate:echo", SessionConfig{RequiredTrustDomain: cfg}, nil, "", "")
			if err == nil || !strings.Contains(err.Error(), code) {
				t.Fatalf("required %q: %v, want %s", cfg, err, code)
			}
		}
	})
	t.Run("MUST 5: the full lifecycle, HELLO through SESSION_CLOSE", func(t *testing.T) {
		s := open(t, SessionConfig{})
		if _, err := s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, "", nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx, "done"); err != nil {
			t.Fatal(err)
		}
		if g, _ := d.resp.sessions().Get(s.ID); g.State != StateClosed {
			t.Fatalf("state %s", g.State)
		}
	})
	t.Run("SHOULD 1: Mode 1 (semantic frame)", func(t *testing.T) {
		s := open(t, SessionConfig{})
		if s.Payload.Mode != ModeSemanticFrame {
			t.Fatalf("negotiated %s", s.Payload.Mode)
		}
		reply, _ := s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, "", nil, nil)
		if r, ok := reply.Body.(*TaskResult); !ok || r.Provenance.PayloadModeUsed != ModeSemanticFrame {
			t.Fatalf("%+v", reply.Body)
		}
	})
	t.Run("SHOULD 2: payload mode fallback", func(t *testing.T) {
		s := open(t, SessionConfig{})
		reply, _ := s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`{"instruction":"no type"}`)}, "", nil, nil)
		if f, ok := reply.Body.(*TaskFailed); !ok || f.Error.Code != CodeFrameInvalid {
			t.Fatalf("%+v", reply.Body)
		}
		reply, _ = s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: json.RawMessage(`"no type"`)}, "", nil, nil)
		if r, ok := reply.Body.(*TaskResult); !ok || r.Provenance.PayloadModeUsed != ModeText {
			t.Fatalf("%+v", reply.Body)
		}
	})
	t.Run("SHOULD 3: session TTL and expiry", func(t *testing.T) {
		s := open(t, SessionConfig{TTLSecs: ptr(uint64(60))})
		g, _ := d.resp.sessions().Get(s.ID)
		if g.TTL.Seconds() != 60 {
			t.Fatalf("TTL %v", g.TTL)
		}
		// Expiry itself is TestSessionExpiry (a fake clock on both sides).
	})
	t.Run("SHOULD 4: confidence in provenance", func(t *testing.T) {
		s := open(t, SessionConfig{})
		reply, _ := s.Submit(ctx, &TaskSubmit{TaskID: "t", Skill: "echo", Input: frame}, "", nil, nil)
		if p := reply.Body.(*TaskResult).Provenance; p.Confidence == nil || *p.Confidence != 0.9 {
			t.Fatalf("confidence %v", p.Confidence)
		}
	})
}
