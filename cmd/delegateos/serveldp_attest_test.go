package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestServeLDPTaskAttestation: a TASK_RESULT's provenance names the
// delegate's signed attestation of the task (what was asked, by whom,
// under which delegation, the output's hash, the cost charged and the
// receipts' hashes), kept in the workspace's ldp-attestations directory;
// 'ldp submit' checks it against the exchange, and refuses a result
// whose output a relay holding the delegate's key changed after the
// attestation was signed.
func TestServeLDPTaskAttestation(t *testing.T) {
	env := mcptest.NewEnv(t)
	ws := filepath.Join(env.Dir, "ws")
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.Extra = serveLDPSection + "workspace: " + strconv.Quote(ws) + "\naudit_log: " + strconv.Quote(filepath.Join(env.Dir, "audit.log")) + "\n"
	serverKey := mcptest.NewKey(t, "server")
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(serverKey)}})
	agentKey := env.KeyFile(env.Agent)
	tok := writeToken(t, env, "agent.tok", env.Mint(nil, "mcp:echo:*"))
	submit := func(base string, extra ...string) (string, string, int) {
		args := append([]string{"ldp", "submit", "--key", agentKey, "--token", "@" + tok, "--trust-domain", "research", "--skill", "echo", "--input", `"attested"`}, extra...)
		return mcptest.CLI(t, append(args, base)...)
	}

	out, errs, code := submit(srv.Base, "--json")
	var rep struct {
		Delegation string          `json:"delegation"`
		Reply      json.RawMessage `json:"reply"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	reply, err := ldp.ParseEnvelope(rep.Reply)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reply.Body.(*ldp.TaskResult)
	if !ok || res.Provenance.DelegateOS == nil || !ldp.ValidTaskAttestationID(res.Provenance.DelegateOS.AttestationID) {
		t.Fatalf("no attestation named: %s", out)
	}
	d := res.Provenance.DelegateOS
	// The stored copy is the one provenance carries, signed by the
	// delegate's key, naming the task, its delegation, cost and receipts.
	data, err := os.ReadFile(filepath.Join(ws, "ldp-attestations", d.AttestationID+".json"))
	if err != nil {
		t.Fatalf("not stored in the workspace: %v", err)
	}
	a, err := ldp.ParseTaskAttestation(data)
	if err != nil {
		t.Fatal(err)
	}
	outHash, _ := ldp.ValueHash(res.Output)
	inHash, _ := ldp.ValueHash(json.RawMessage(`"attested"`))
	if a.ID != d.AttestationID || a.Signer != serverKey.DID() || a.Delegate != "ldp:delegate:docs" || a.InitiatorSigner != env.Agent.DID() ||
		a.Skill != "echo" || a.DelegationID != rep.Delegation || a.OutputHash != outHash || a.InputHash != inHash ||
		a.CostChargedMicrocents == nil || *a.CostChargedMicrocents != 100 || len(a.ReceiptHashes) != 2 || !slices.Equal(a.ReceiptHashes, d.ReceiptHashes) {
		t.Fatalf("stored attestation %s\nprovenance %+v", data, d)
	}
	out, errs, code = submit(srv.Base)
	if code != 0 || !strings.Contains(out, "attestation: ldpatt_") || !strings.Contains(out, "signed by "+serverKey.DID()+"; checked against the request, output, cost and receipts") {
		t.Fatalf("submit: exit %d\n%s%s", code, out, errs)
	}
	if ids, _ := os.ReadDir(filepath.Join(ws, "ldp-attestations")); len(ids) < 2 {
		t.Fatalf("stored %d", len(ids))
	}

	// A relay with the delegate's key changes the output and signs the
	// envelope again: the envelope verifies, its attestation does not.
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequest(r.Method, srv.Base+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if e, err := ldp.ParseEnvelope(b); err == nil {
			if res, ok := e.Body.(*ldp.TaskResult); ok {
				res.Output = json.RawMessage(`{"content":[{"type":"text","text":"forged"}]}`)
				e.Provenance = &res.Provenance
				ldp.SignEd25519(e, serverKey.PrivateKey())
				b, _ = json.Marshal(e)
			}
		}
		for k, v := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(b)
	}))
	t.Cleanup(relay.Close)
	out, errs, code = submit(relay.URL)
	if code == 0 || strings.Contains(out, "forged") || !strings.Contains(out+errs, "task attestation refused: its output_hash") {
		t.Fatalf("forged output: exit %d\n%s%s", code, out, errs)
	}
}
