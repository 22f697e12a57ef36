//go:build unix

package proxy_test

// The end-to-end tests run the real delegateos binary between mcp-go's
// client and the docserver (examples/docserver) with internal/mcptest: each
// test mints its own keys and tokens, writes a policy file, starts
// `delegateos proxy ... -- docserver ...` on pipes it owns, and talks to it
// with mcp-go's client (or with raw JSON lines). Every byte the proxy
// writes to stdout is checked to be a JSON-RPC frame. This file holds the
// checks of the proxy's denials.

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

func TestMain(m *testing.M) {
	if os.Getenv(silentUpstreamEnv) != "" {
		os.Exit(runSilentUpstream())
	}
	if mode := os.Getenv(twoFacedEnv); mode != "" {
		os.Exit(runTwoFacedUpstream(mode))
	}
	os.Exit(mcptest.Run(m))
}

// denial is the error data a refused call must carry (DelegateOS §11.2).
type denial struct {
	typ dct.DenialType
	// detail is a substring the detail must contain; the detail must never
	// be empty.
	detail    string
	requested dct.Capability
	// granted is the token's capabilities as the proxy reports them; nil
	// means the member must be absent (the token never verified).
	granted []dct.Capability
}

// denialMembers are the only members the error data may have.
var denialMembers = []string{"type", "detail", "requested", "granted"}

// isDenial reports whether r was refused by the gate with type typ.
func isDenial(r mcptest.Result, typ dct.DenialType) bool {
	if r.RPC == nil || r.RPC.Code != -32001 {
		return false
	}
	raw, _ := json.Marshal(r.RPC.Data)
	var data struct {
		Type dct.DenialType `json:"type"`
	}
	return json.Unmarshal(raw, &data) == nil && data.Type == typ
}

func checkDenial(t *testing.T, r mcptest.Result, want denial) {
	t.Helper()
	if r.Err == nil {
		t.Fatalf("the call succeeded (%+v); want a %s denial", r.Res.Content, want.typ)
	}
	if r.RPC == nil {
		t.Fatalf("the call failed with %v, not a JSON-RPC error; want a %s denial", r.Err, want.typ)
	}
	raw, err := json.Marshal(r.RPC.Data)
	if err != nil {
		t.Fatal(err)
	}
	// The message is what a person sees: it names the type and the detail.
	var shown struct{ Detail string }
	_ = json.Unmarshal(raw, &shown)
	if want := "DCT verification failed: " + string(want.typ) + " — " + shown.Detail; r.RPC.Code != -32001 || r.RPC.Message != want {
		t.Errorf("error code %d message %q; want -32001 %q", r.RPC.Code, r.RPC.Message, want)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatalf("error data is not an object: %s", raw)
	}
	for k := range data {
		if !slices.Contains(denialMembers, k) {
			t.Errorf("error data has member %q; only %v are defined (data %s)", k, denialMembers, raw)
		}
	}
	var typ, detail string
	if json.Unmarshal(data["type"], &typ) != nil || typ != string(want.typ) {
		t.Errorf("data.type = %s, want %q (data %s)", data["type"], want.typ, raw)
	}
	if json.Unmarshal(data["detail"], &detail) != nil || detail == "" || !strings.Contains(detail, want.detail) {
		t.Errorf("data.detail = %s, want one containing %q", data["detail"], want.detail)
	}
	if got, ok := capabilityJSON(data["requested"]); !ok || got != want.requested {
		t.Errorf("data.requested = %s, want %s", data["requested"], mcptest.MustJSON(want.requested))
	}
	switch raw, present := data["granted"]; {
	case want.granted == nil && present:
		t.Errorf("data.granted = %s; want it absent", raw)
	case want.granted != nil:
		var got []map[string]string
		if json.Unmarshal(raw, &got) != nil || len(got) != len(want.granted) {
			t.Errorf("data.granted = %s, want %s", raw, mcptest.MustJSON(want.granted))
			break
		}
		for i, c := range got {
			if len(c) != 3 || c["namespace"] != want.granted[i].Namespace || c["action"] != want.granted[i].Action || c["resource"] != want.granted[i].Resource {
				t.Errorf("data.granted = %s, want %s", raw, mcptest.MustJSON(want.granted))
				break
			}
		}
	}
}

// capabilityJSON reads {namespace, action, resource} and nothing else.
func capabilityJSON(raw json.RawMessage) (dct.Capability, bool) {
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil || len(m) != 3 {
		return dct.Capability{}, false
	}
	return dct.Capability{Namespace: m["namespace"], Action: m["action"], Resource: m["resource"]}, true
}
