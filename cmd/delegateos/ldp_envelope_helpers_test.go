package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/ldp"
)

// The red team's helpers (issue 21): envelopes built, signed and posted by
// hand, so that each can be forged, tampered with or replayed as bytes.

// peerEnvelope is an envelope of session sid from from to the delegate
// ldp:delegate:docs, with a fresh message ID, nonce and timestamp.
func peerEnvelope(sid, from string, body ldp.Body, mode ldp.PayloadMode) *ldp.Envelope {
	if mode == "" {
		mode = ldp.ModeText
	}
	return &ldp.Envelope{MessageID: peerID(), SessionID: sid, From: from, To: "ldp:delegate:docs", Body: body,
		PayloadMode: mode, Timestamp: timestamp.Format(time.Now()), Nonce: peerID()}
}

func peerID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// peerSign signs e with key (Ed25519 profile) and returns its bytes.
func peerSign(t *testing.T, e *ldp.Envelope, key ed25519.PrivateKey) []byte {
	t.Helper()
	if key != nil {
		if err := ldp.SignEd25519(e, key); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// peerPost posts raw envelope bytes to the server's path (ldp.MessagesPath
// when empty) and returns the HTTP status and the parsed reply (nil when
// the body is not an envelope).
func peerPost(t *testing.T, srv *mcptest.Server, path string, body []byte, bearer string) (int, *ldp.Envelope, []byte) {
	t.Helper()
	if path == "" {
		path = ldp.MessagesPath
	}
	req, err := http.NewRequest(http.MethodPost, srv.Base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	e, _ := ldp.ParseEnvelope(b)
	return res.StatusCode, e, b
}

// peerFailCode is the code of a TASK_FAILED or SESSION_REJECT reply, "" for
// anything else.
func peerFailCode(e *ldp.Envelope) string {
	if e == nil {
		return "(no envelope)"
	}
	switch b := e.Body.(type) {
	case *ldp.TaskFailed:
		return b.Error.Code
	case *ldp.SessionReject:
		if b.Error != nil {
			return b.Error.Code
		}
		return "SESSION_REJECT"
	}
	return ""
}

// peerAllowed waits until the gate has logged want allowed calls of tool
// (its log is written as calls settle) and returns how many it logged.
func peerAllowed(t *testing.T, srv *mcptest.Server, tool string, want int) int {
	t.Helper()
	count := func() int {
		return len(srv.LogWith("decision", func(l map[string]any) bool { return l["tool"] == tool && l["allowed"] == true }))
	}
	mcptest.Eventually(t, fmt.Sprintf("%d allowed %s calls", want, tool), func() bool { return count() >= want })
	return count()
}

// holderArgsTask is the TASK_SUBMIT envelope of task id (skill args,
// input as written) from ldp:delegate:holder in session s, carrying tok
// in its DelegateOS member: for the holder of tok to sign.
func holderArgsTask(s *ldp.ClientSession, tok *dct.Token, id, input string) *ldp.Envelope {
	e := peerEnvelope(s.ID, "ldp:delegate:holder", &ldp.TaskSubmit{TaskID: id, Skill: "args", Input: json.RawMessage(input)}, ldp.ModeText)
	e.DelegateOS = &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}
	return e
}
