//go:build unix

package proxy_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
)

// A gated request's span is a child of the client's trace context
// (params._meta.traceparent), says what the gate decided and what it cost,
// and has a child span for the upstream call whose context the upstream
// receives in its params._meta; a refused request's span says why and is
// never forwarded. Checked over OTLP/HTTP and OTLP/gRPC, as a collector
// receives them.
func TestE2ETracingSpansAndPropagation(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			t.Parallel()
			recv, endpoint := mcptest.StartOTLP(t, protocol)
			e := mcptest.NewEnv(t)
			tok := e.Mint(mcptest.Budget(1000), "docs:read:/project/sub/**", "mcp:echo:*")
			wrap, record := recordUpstream(t, e)
			p := e.StartProxy(mcptest.ProxyOptions{
				Policy: e.Policy(mcptest.Priced("echo", 7)), Token: tok, Wrap: wrap,
				Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
					"OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_SERVICE_NAME=gate-under-test"},
			})
			c := newLineClient(t, p)
			c.initialize()
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"00-` + clientTrace + `-` + clientSpan + `-01","progressToken":"p1"},"name":"echo","arguments":{"text":"traced"}}}`)
			if r := c.response(); !strings.Contains(r, `"id":1`) || strings.Contains(r, `"error"`) {
				t.Fatalf("echo: %s", r)
			}
			c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/project/secret.md"},"_meta":{"traceparent":"00-` + clientTrace + `-` + clientSpan + `-01"}}}`)
			if r := c.response(); !strings.Contains(r, `"id":2`) || !strings.Contains(r, string(dct.CapabilityNotGranted)) {
				t.Fatalf("read_file outside the grant: %s", r)
			}
			c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"untraced client"}}}`)
			if r := c.response(); !strings.Contains(r, `"id":3`) || strings.Contains(r, `"error"`) {
				t.Fatalf("echo: %s", r)
			}
			frames := recordedThrough(t, record, `"echo"`, 2)
			p.Stdin.Close()
			if !p.WaitExit(20 * time.Second) {
				t.Fatal("the proxy did not exit")
			}

			// What the upstream received.
			var forwarded []map[string]any
			for _, f := range frames {
				if strings.Contains(f, "read_file") && strings.Contains(f, "secret") {
					t.Errorf("the refused call reached the upstream: %s", f)
				}
				if !strings.Contains(f, `"tools/call"`) {
					continue
				}
				var m struct{ Params map[string]any }
				if err := json.Unmarshal([]byte(f), &m); err != nil {
					t.Fatalf("upstream frame %s: %v", f, err)
				}
				forwarded = append(forwarded, m.Params)
			}
			if len(forwarded) != 2 {
				t.Fatalf("upstream received %d tools/call, want 2: %q", len(forwarded), frames)
			}
			meta1, _ := forwarded[0]["_meta"].(map[string]any)
			meta3, _ := forwarded[1]["_meta"].(map[string]any)
			if meta1["progressToken"] != "p1" {
				t.Errorf("the client's other _meta members must pass: %v", meta1)
			}
			tp1, _ := meta1["traceparent"].(string)
			tp3, _ := meta3["traceparent"].(string)

			spans := recv.Spans()
			byName := map[string][]*tracepb.Span{}
			for _, s := range spans {
				byName[s.Name] = append(byName[s.Name], s)
			}
			calls, ups, denied := byName["tools/call echo"], byName["upstream tools/call"], byName["tools/call read_file"]
			if len(calls) != 2 || len(ups) != 2 || len(denied) != 1 {
				names := []string{}
				for _, s := range spans {
					names = append(names, s.Name)
				}
				t.Fatalf("spans %q: want two tools/call echo, two upstream tools/call, one tools/call read_file", names)
			}
			if recv.Services[0] != "gate-under-test" {
				t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", recv.Services[0])
			}
			var traced, untraced *tracepb.Span
			for _, s := range calls {
				if hex.EncodeToString(s.TraceId) == clientTrace {
					traced = s
				} else {
					untraced = s
				}
			}
			if traced == nil || untraced == nil {
				t.Fatal("want one echo span in the client's trace and one in a trace of its own")
			}
			if got := hex.EncodeToString(traced.ParentSpanId); got != clientSpan {
				t.Errorf("the traced call's parent span %s, want the client's %s", got, clientSpan)
			}
			if len(untraced.ParentSpanId) != 0 {
				t.Errorf("a call without trace context has parent %x", untraced.ParentSpanId)
			}
			for _, s := range append(calls, denied...) {
				if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
					t.Errorf("%s: kind %v, want server", s.Name, s.Kind)
				}
			}
			if mcptest.AttrString(traced, "delegateos.decision") != "allow" || mcptest.AttrString(traced, "delegateos.capability") != "mcp:echo:*" ||
				mcptest.AttrString(traced, "mcp.method.name") != "tools/call" || mcptest.AttrString(traced, "delegateos.outcome") != "result" {
				t.Errorf("allowed span attributes %v", traced.Attributes)
			}
			if v := mcptest.Attr(traced, "delegateos.cost.charged_microcents"); v == nil || v.GetIntValue() != 7 {
				t.Errorf("charged %v, want 7", v)
			}
			if v := mcptest.Attr(traced, "delegateos.delegation_path"); v == nil || len(v.GetArrayValue().GetValues()) != 1 ||
				v.GetArrayValue().Values[0].GetStringValue() != tok.Unverified().Authority.DelegationID {
				t.Errorf("delegation path %v, want [%s]", v, tok.Unverified().Authority.DelegationID)
			}
			d := denied[0]
			if mcptest.AttrString(d, "delegateos.decision") != "deny" || mcptest.AttrString(d, "delegateos.denial_type") != string(dct.CapabilityNotGranted) ||
				mcptest.AttrString(d, "delegateos.capability") != "docs:read:/project/secret.md" || d.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("denied span attributes %v status %v", d.Attributes, d.Status)
			}
			if hex.EncodeToString(d.TraceId) != clientTrace {
				t.Errorf("the denied call's span is not in the client's trace")
			}
			// Each upstream span is the child of its call's span, and its
			// context is what the upstream received.
			for _, c := range []struct {
				call *tracepb.Span
				tp   string
			}{{traced, tp1}, {untraced, tp3}} {
				var up *tracepb.Span
				for _, u := range ups {
					if string(u.ParentSpanId) == string(c.call.SpanId) {
						up = u
					}
				}
				if up == nil {
					t.Fatalf("no upstream span under %x", c.call.SpanId)
				}
				if up.Kind != tracepb.Span_SPAN_KIND_CLIENT || string(up.TraceId) != string(c.call.TraceId) {
					t.Errorf("upstream span kind %v trace %x", up.Kind, up.TraceId)
				}
				want := "00-" + hex.EncodeToString(up.TraceId) + "-" + hex.EncodeToString(up.SpanId) + "-01"
				if c.tp != want {
					t.Errorf("the upstream received traceparent %q, want its upstream span's %q", c.tp, want)
				}
			}
		})
	}
}

// With no OTEL_* variable set nothing is traced, and the forwarded request
// is the client's, byte for byte (less the id the relay numbers it by).
func TestE2ETracingOffForwardsUnchanged(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	wrap, record := recordUpstream(t, e)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok, Wrap: wrap,
		Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_TRACES_EXPORTER="}})
	c := newLineClient(t, p)
	c.initialize()
	const params = `{"name":"echo","arguments":{"text":"x"},"_meta":{"traceparent":"00-` + clientTrace + `-` + clientSpan + `-01"}}`
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`)
	c.response()
	frames := recordedThrough(t, record, `"echo"`, 1)
	for _, f := range frames {
		if strings.Contains(f, `"echo"`) && !strings.HasSuffix(f, `"params":`+params+`}`) {
			t.Errorf("forwarded %s, want the client's params unchanged", f)
		}
	}
}

// An OTEL_* setting delegateos cannot honour stops the start, saying which,
// with nothing written to the audit log (it was opened, and a checkpoint
// written at exit, before tracing was set up).
func TestE2ETracingBadSettingRefused(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"OTEL_TRACES_EXPORTER=zipkin":           "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/json": "http/json",
	} {
		e := mcptest.NewEnv(t)
		logPath := filepath.Join(e.Dir, "audit.jsonl")
		pol := e.Policy()
		pol.Extra = "proxy_key: " + e.KeyFile(mcptest.NewKey(t, "proxy")) + "\naudit_log: " + logPath + "\n"
		p := e.StartProxy(mcptest.ProxyOptions{Policy: pol, LogToStderr: true,
			Env:      []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", env},
			WantExit: func(code int) bool { return code == 2 }})
		if !p.WaitExit(20 * time.Second) {
			t.Fatalf("%s: the proxy did not stop", env)
		}
		if got := p.Stderr.String(); !strings.Contains(got, want) {
			t.Errorf("%s: stderr %q, want it to name %s", env, got, want)
		}
		if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
			t.Errorf("%s: the failed start wrote the audit log:\n%s", env, b)
		}
	}
}
