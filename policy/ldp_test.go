package policy

import (
	"strings"
	"testing"
)

const ldpPolicy = `
ldp:
  delegate_id: ldp:delegate:docs
  name: Docs delegate
  model_family: none
  model_version: docserver-1
  context_window: 8192
  trust_domain: {name: research, allow_cross_domain: true, trusted_peers: [partner]}
  payload_modes: [semantic_frame, text]
  skills:
    - {name: echo, tool: echo, input_argument: text}
    - {name: readme, tool: read_file, arguments: {path: README.md}}
`

func TestParseLDP(t *testing.T) {
	p, err := Parse([]byte(ldpPolicy), "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	c := p.LDP
	if c == nil || c.DelegateID != "ldp:delegate:docs" || c.ContextWindow != 8192 || c.TrustDomain.Name != "research" ||
		!c.TrustDomain.AllowCrossDomain || len(c.TrustDomain.TrustedPeers) != 1 || len(c.Skills) != 2 {
		t.Fatalf("%+v", c)
	}
	if s := c.Skill("echo"); s == nil || s.Tool != "echo" || s.InputArgument != "text" || s.Arguments != nil {
		t.Fatalf("echo %+v", s)
	}
	if s := c.Skill("readme"); string(s.Arguments) != `{"path":"README.md"}` {
		t.Fatalf("readme %s", s.Arguments)
	}
	p, err = Parse([]byte(strings.Replace(ldpPolicy, "  skills:", "  hmac_secret_file: ldp.secret\n  skills:", 1)), "/etc/dos")
	if err != nil || p.LDP.HMACSecretFile != "/etc/dos/ldp.secret" {
		t.Fatalf("hmac_secret_file: %v %+v", err, p)
	}
	if _, err := Parse([]byte(strings.Replace(ldpPolicy, "  skills:", "  hmac_secret_file: a\n  hmac_secret: bbbbbbbbbbbbbbbbbbbb\n  skills:", 1)), "/tmp"); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("both: %v", err)
	}
	if p, _ := Parse([]byte("roots: []\n"), "/tmp"); p.LDP != nil {
		t.Fatal("an LDP section from nowhere")
	}
}

func TestParseLDPRefuses(t *testing.T) {
	for _, c := range []struct{ edit, want string }{
		{"delegate_id: ldp:delegate:docs", "ldp.delegate_id"},
		{"payload_modes: [semantic_frame, text]", "must include text"},
		{"payload_modes: [semantic_frame, text]", "semantic_graph"},
		{"context_window: 8192", "ldp.context_window"},
		{"- {name: echo, tool: echo, input_argument: text}", "listed twice"},
		{"- {name: echo, tool: echo, input_argument: text}", "needs name and tool"},
		{"- {name: echo, tool: echo, input_argument: text}", "unknown"},
		{"trust_domain: {name: research, allow_cross_domain: true, trusted_peers: [partner]}", "needs name"},
	} {
		in := ldpPolicy
		switch c.want {
		case "ldp.delegate_id":
			in = strings.Replace(in, c.edit, "delegate_id: docs", 1)
		case "must include text":
			in = strings.Replace(in, c.edit, "payload_modes: [semantic_frame]", 1)
		case "semantic_graph":
			in = strings.Replace(in, c.edit, "payload_modes: [semantic_graph, text]", 1)
		case "ldp.context_window":
			in = strings.Replace(in, c.edit, "context_window: 0", 1)
		case "listed twice":
			in = strings.Replace(in, c.edit, c.edit+"\n    "+c.edit, 1)
		case "needs name and tool":
			in = strings.Replace(in, c.edit, "- {name: echo}", 1)
		case "unknown":
			in = strings.Replace(in, c.edit, "- {name: echo, tool: echo, shell: rm}", 1)
		case "needs name":
			in = strings.Replace(in, c.edit, "trust_domain: {allow_cross_domain: true}", 1)
		}
		_, err := Parse([]byte(in), "/tmp")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
}
