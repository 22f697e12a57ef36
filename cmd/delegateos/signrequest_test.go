package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

func TestSignRequest(t *testing.T) {
	dir := t.TempDir()
	agent, _ := identity.FromSeed(bytes.Repeat([]byte{7}, 32), "agent")
	root, _ := identity.FromSeed(bytes.Repeat([]byte{8}, 32), "root")
	keyFile := filepath.Join(dir, "agent.key")
	if err := identity.SaveKeyFile(keyFile, agent); err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n"
	bodyFile := filepath.Join(dir, "call.json")
	os.WriteFile(bodyFile, []byte(body), 0o600)
	tok, err := dct.Create(dct.CreateParams{Issuer: root, Delegatee: agent.ID(),
		Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
		ContractID:   "ct_sign", DelegationID: "del_sign", MaxChainDepth: 1, MaxBudgetMicrocents: 1,
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "agent.tok")
	os.WriteFile(tokFile, []byte(tok.String()), 0o600)

	sign := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"sign-request"}, args...), strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}
	verify := func(headers map[string]string, target, body string) error {
		r := httptest.NewRequest("POST", target, strings.NewReader(body))
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		return (&avpsig.Verifier{}).Verify(r, []byte(body), agent.DID())
	}
	lines := func(out string) map[string]string {
		h := map[string]string{}
		for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(l, ": ")
			h[k] = v
		}
		return h
	}

	code, out, errs := sign("", "--key", keyFile, "--data", "@"+bodyFile, "--token", "@"+tokFile, "http://127.0.0.1:8080/mcp?b=x+y&a=1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	h := lines(out)
	if len(h) != 2 || !strings.HasPrefix(h[avpsig.SignatureHeader], `AVP-Sig v="2",did="`+agent.DID()+`"`) || h[avpsig.CoveredHeader] == "" {
		t.Fatalf("output %q", out)
	}
	if err := verify(h, "/mcp?a=1&b=x%20y", body); err != nil {
		t.Fatal(err)
	}
	if err := verify(h, "/mcp?a=1&b=x%20y", body+" "); err == nil || !strings.Contains(err.Error(), string(avpsig.ReasonBodyTampered)) {
		t.Fatalf("tampered body: %v", err)
	}

	// The body from standard input, as JSON, for an AVP server.
	code, out, errs = sign(body, "--key", keyFile, "--data", "-", "--json", "--header", "Authorization", "http://h/mcp")
	var hj map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &hj) != nil {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if hj["Authorization"] == "" {
		t.Fatalf("--header Authorization: %s", out)
	}
	if err := verify(hj, "/mcp", body); err != nil {
		t.Fatal(err)
	}

	// A key that does not hold the token is refused before signing.
	other := filepath.Join(dir, "root.key")
	identity.SaveKeyFile(other, root)
	if code, out, errs := sign("", "--key", other, "--token", "@"+tokFile, "http://h/mcp"); code != exitDenied || out != "" || !strings.Contains(errs, "holder") {
		t.Fatalf("wrong key: exit %d, %q, %q", code, out, errs)
	}
	for _, args := range [][]string{
		{"--key", keyFile},
		{"--key", keyFile, "/mcp"},
		{"--key", keyFile, "--method", "post", "http://h/mcp"},
		{"--key", keyFile, "http://h/mcp?a=%zz"},
		{"--key", keyFile, "--data", "-", "--token", "-", "http://h/mcp"},
		{"--key", keyFile, "--header", "Bad Header", "http://h/mcp"},
		{"--key", keyFile, "--header", "avp-sig-covered", "http://h/mcp"},
	} {
		if code, _, errs := sign("", args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s)", args, code, errs)
		}
	}
}
