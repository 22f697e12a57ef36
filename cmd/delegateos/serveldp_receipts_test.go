package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestServeLDPReceiptHashes: with an audit log, a TASK_RESULT's
// provenance names the digests of its call's decision and execution
// receipts, which are entries of the log that 'audit prove' proves and
// 'audit verify-receipt' accepts; a refused task's TASK_FAILED names its
// decision receipt; without an audit log provenance names none.
func TestServeLDPReceiptHashes(t *testing.T) {
	env := mcptest.NewEnv(t)
	logPath := filepath.Join(env.Dir, "audit.log")
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection + "audit_log: " + strconv.Quote(logPath) + "\n"
	serverKey := mcptest.NewKey(t, "server")
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(serverKey)}})

	ctx := context.Background()
	tok := env.Mint(nil, "mcp:echo:*", "docs:read:/**")
	holder := &ldp.Client{ID: "ldp:delegate:holder", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	s, err := holder.Open(ctx, srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Submit(ctx, &ldp.TaskSubmit{TaskID: "ok", Skill: "echo", Input: json.RawMessage(`"receipted"`)}, ldp.ModeText, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reply.Body.(*ldp.TaskResult)
	if !ok || res.Provenance.DelegateOS == nil || len(res.Provenance.DelegateOS.ReceiptHashes) != 2 {
		t.Fatalf("result: %+v", reply.Body)
	}
	ran := res.Provenance.DelegateOS.ReceiptHashes
	// A task under a token without echo's capability: the gate refuses
	// it, and its TASK_FAILED names the refusal's receipt.
	narrow := env.Mint(nil, "docs:read:/**")
	reply, err = s.Submit(ctx, &ldp.TaskSubmit{TaskID: "refused", Skill: "echo", Input: json.RawMessage(`"no"`)}, ldp.ModeText,
		&ldp.DelegateOSMember{DCT: narrow.String(), Format: dct.Format}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := reply.Body.(*ldp.TaskFailed)
	if !ok || f.Error.Code != "capability_not_granted" || f.DelegateOS == nil || len(f.DelegateOS.ReceiptHashes) != 1 {
		t.Fatalf("refused: %+v", reply.Body)
	}
	refused := f.DelegateOS.ReceiptHashes[0]

	// The server's final checkpoint signs every entry.
	srv.Signal(syscall.SIGTERM)
	if !srv.WaitExit(20 * time.Second) {
		t.Fatal("serve did not exit")
	}
	entries := map[string]int{} // digest -> entry number
	kinds := map[string]string{}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 2<<20)
	for n := 1; sc.Scan(); n++ {
		sum := sha256.Sum256(sc.Bytes())
		d := hex.EncodeToString(sum[:])
		var m struct {
			Kind     string `json:"schema_version"`
			Decision string `json:"decision"`
			DecHash  string `json:"decision_receipt_hash"`
		}
		json.Unmarshal(sc.Bytes(), &m)
		entries[d], kinds[d] = n, m.Kind+" "+m.Decision
	}
	for _, c := range []struct{ digest, kind string }{
		{ran[0], "decision_receipt/2 ALLOW"}, {ran[1], "execution_receipt/2 "}, {refused, "decision_receipt/2 BLOCK"},
	} {
		n, ok := entries[c.digest]
		if !ok || kinds[c.digest] != c.kind {
			t.Fatalf("%s: entry %d is %q, want %q", c.digest, n, kinds[c.digest], c.kind)
		}
		bundle := filepath.Join(env.Dir, "bundle-"+c.digest[:8]+".json")
		if out, errs, code := mcptest.CLI(t, "audit", "prove", logPath, "--receipt", strconv.Itoa(n), "--key-id", serverKey.DID(), "--out", bundle); code != 0 {
			t.Fatalf("prove %d: exit %d\n%s%s", n, code, out, errs)
		}
		out, errs, code := mcptest.CLI(t, "audit", "verify-receipt", bundle, "--key-id", serverKey.DID(), "--json")
		var v struct {
			OK     bool   `json:"ok"`
			Digest string `json:"digest"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || !v.OK || v.Digest != c.digest {
			t.Fatalf("verify-receipt %d: exit %d\n%s%s", n, code, out, errs)
		}
	}

	// Without an audit log, provenance names no receipt (the cost and the
	// attestation, which names none either).
	plain := startLDPServe(t, env, "plain")
	s, err = holder.Open(ctx, plain.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	reply, err = s.Submit(ctx, &ldp.TaskSubmit{TaskID: "plain", Skill: "echo", Input: json.RawMessage(`"x"`)}, ldp.ModeText, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, ok = reply.Body.(*ldp.TaskResult)
	if !ok || res.Provenance.DelegateOS == nil || res.Provenance.DelegateOS.ReceiptHashes != nil || res.Provenance.DelegateOS.AttestationID == "" ||
		strings.Contains(string(res.Provenance.DelegateOS.Attestation), "receipt_hashes") {
		t.Fatalf("without an audit log: %+v", reply.Body)
	}
}
