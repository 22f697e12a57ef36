package ldp

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestNegotiate(t *testing.T) {
	sf, tx, sg, eh := ModeSemanticFrame, ModeText, ModeSemanticGraph, ModeEmbeddingHints
	cases := []struct {
		name                 string
		initiator, responder []PayloadMode
		mode                 PayloadMode
		chain                []PayloadMode
	}{
		{"both frame", []PayloadMode{sf, tx}, []PayloadMode{sf, tx}, sf, []PayloadMode{tx}},
		{"responder text only", []PayloadMode{sf, tx}, []PayloadMode{tx}, tx, nil},
		{"nothing listed", nil, nil, tx, nil},
		{"unimplemented skipped", []PayloadMode{sg, sf, tx}, []PayloadMode{sg, tx}, tx, nil},
		{"spec §4.2 flow", []PayloadMode{sg, sf, tx}, []PayloadMode{sf, tx}, sf, []PayloadMode{tx}},
		{"initiator prefers text", []PayloadMode{tx, sf}, []PayloadMode{sf, tx}, tx, nil},
		// Text ends the chain even when the initiator did not list it (§4.1, §4.3).
		{"text appended", []PayloadMode{sf}, []PayloadMode{sf, tx}, sf, []PayloadMode{tx}},
		{"no common mode", []PayloadMode{eh}, []PayloadMode{sf}, tx, nil},
	}
	for _, c := range cases {
		got := Negotiate(c.initiator, c.responder)
		if got.Mode != c.mode || !slices.Equal(got.Fallback, c.chain) {
			t.Errorf("%s: %+v, want %s %v", c.name, got, c.mode, c.chain)
		}
	}
}

func TestFallBack(t *testing.T) {
	n := Negotiate([]PayloadMode{ModeSemanticFrame, ModeText}, []PayloadMode{ModeSemanticFrame, ModeText})
	if !n.Allows(ModeSemanticFrame) || !n.Allows(ModeText) || n.Allows(ModeSemanticGraph) {
		t.Fatal("Allows")
	}
	m, err := n.FallBack()
	if err != nil || m != ModeText || n.Mode != ModeText || len(n.Fallback) != 0 {
		t.Fatalf("%v %v %+v", m, err, n)
	}
	if n.Allows(ModeSemanticFrame) {
		t.Fatal("after falling back, the session still takes frames")
	}
	if _, err := n.FallBack(); !errors.Is(err, ErrNoFallback) {
		t.Fatalf("err = %v", err)
	}
}

func TestValidateInput(t *testing.T) {
	cases := []struct {
		mode  PayloadMode
		in    string
		frame bool // a *FrameError
		ok    bool
	}{
		{ModeSemanticFrame, `{"task_type":"classification","instruction":"Classify sentiment","input":"x","labels":["a"]}`, false, true},
		{ModeSemanticFrame, `{"task_type":"classification"}`, true, false},
		{ModeSemanticFrame, `{"instruction":"x"}`, true, false},
		{ModeSemanticFrame, `{"task_type":"","instruction":"x"}`, true, false},
		{ModeSemanticFrame, `{"task_type":1,"instruction":"x"}`, true, false},
		{ModeSemanticFrame, `"just text"`, true, false},
		{ModeSemanticFrame, `null`, true, false},
		{ModeText, `"just text"`, false, true},
		{ModeText, `{"prompt":"x"}`, false, true},
		{ModeText, ``, false, false},
		{ModeSemanticGraph, `{}`, false, false},
	}
	for _, c := range cases {
		err := ValidateInput(c.mode, json.RawMessage(c.in))
		var fe *FrameError
		if (err == nil) != c.ok || errors.As(err, &fe) != c.frame {
			t.Errorf("%s %s: %v", c.mode, c.in, err)
		}
	}
}
