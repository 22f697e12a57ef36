package metrics

import (
	"maps"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/policy"
)

// Path is where Handler is mounted.
const Path = "/metrics"

const namespace = "delegateos"

// Metrics holds a daemon's metrics in their own registry. Its methods are
// safe for concurrent use.
type Metrics struct {
	// Registry holds every metric; register more on it if needed.
	Registry *prometheus.Registry

	decisions       *prometheus.CounterVec
	decisionLatency *prometheus.HistogramVec
	upstreamLatency *prometheus.HistogramVec
	spend           prometheus.Counter
	toolCalls       *prometheus.CounterVec
	// tools are the tool names counted under their own label (Tools),
	// replaced whole when a reload names more; toolsMu serializes Tools.
	tools   atomic.Pointer[map[string]bool]
	toolsMu sync.Mutex
}

// OtherTool is the tool label of every tool the policy does not name
// exactly, so that a client cannot add label values by naming tools.
const OtherTool = "other"

// maxToolLabels bounds the tools counted under their own label.
const maxToolLabels = 256

// methods are the method labels, and results the decision results: every
// combination is exported from the start, at zero.
var (
	methods = []string{gate.MethodToolsCall, gate.MethodResourcesRead, gate.MethodResourcesSubscribe,
		gate.MethodPromptsGet, gate.MethodCompletionComplete, gate.MethodSubscriptionsListen, "other"}
	results = []string{"allowed", "denied", string(dct.Malformed), string(dct.Revoked), string(dct.InvalidSignature),
		string(dct.AttenuationViolation), string(dct.Expired), string(dct.BudgetExceeded), string(dct.CapabilityNotGranted),
		string(gate.RateLimited), string(gate.StoreUnavailable), string(gate.StoreReset), string(gate.EvidenceUnavailable),
		string(gate.ApprovalDeclined), string(gate.ApprovalUnavailable), string(gate.ToolNotPinned)}
)

var _ gate.Observer = (*Metrics)(nil)

// New returns the metrics, registered.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "decisions_total",
			Help: "Gate decisions by request method and result (allowed, or the denial type).",
		}, []string{"method", "result"}),
		decisionLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "decision_duration_seconds",
			Help:    "Time the gate took to decide a request.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10), // 1 µs to 0.26 s
		}, []string{"method"}),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "upstream_duration_seconds",
			Help:    "Time from the gate's decision on an allowed call to its settlement (the upstream's answer).",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10), // 0.1 ms to 26 s
		}, []string{"method"}),
		spend: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "spend_committed_microcents_total",
			Help: "What settled calls were charged, in microcents.",
		}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "tool_calls_total",
			Help: "tools/call decisions by tool (the tools the policy names exactly; any other is \"other\") and result (allowed or denied).",
		}, []string{"tool", "result"}),
	}
	m.Registry.MustRegister(m.decisions, m.decisionLatency, m.upstreamLatency, m.spend, m.toolCalls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, meth := range methods {
		for _, r := range results {
			m.decisions.WithLabelValues(meth, r)
		}
		m.decisionLatency.WithLabelValues(meth)
		m.upstreamLatency.WithLabelValues(meth)
	}
	m.toolCalls.WithLabelValues(OtherTool, "allowed")
	m.toolCalls.WithLabelValues(OtherTool, "denied")
	return m
}

// BuildInfo registers delegateos_build_info: 1, labelled with the
// version, the Go version and the VCS revision the binary was built from.
// Call it once.
func (m *Metrics) BuildInfo(version, revision string) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help:        "Always 1; its labels say which build of delegateos is running.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "revision": revision}})
	g.Set(1)
	m.Registry.MustRegister(g)
}

// Tools counts the tools pol's tool map names exactly (a rule's match
// without glob characters) under their own label in tool_calls_total, at
// most the first 256; every other tool is counted as OtherTool. Call it
// before the first decision, and again with a reloaded policy: the tools
// it names are added (a series, once exported, stays).
func (m *Metrics) Tools(pol *policy.Policy) {
	m.toolsMu.Lock()
	defer m.toolsMu.Unlock()
	tools := map[string]bool{}
	if old := m.tools.Load(); old != nil {
		tools = maps.Clone(*old)
	}
	for _, r := range pol.Tools {
		if len(tools) >= maxToolLabels {
			break
		}
		if r.Match == "" || !utf8.ValidString(r.Match) || strings.ContainsAny(r.Match, "*?[]{}\\") {
			continue
		}
		tools[r.Match] = true
		m.toolCalls.WithLabelValues(r.Match, "allowed")
		m.toolCalls.WithLabelValues(r.Match, "denied")
	}
	m.tools.Store(&tools)
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// method is the label of a request method: one of the gate's, or "other".
func method(s string) string {
	switch s {
	case "":
		return gate.MethodToolsCall
	case gate.MethodToolsCall, gate.MethodResourcesRead, gate.MethodResourcesSubscribe,
		gate.MethodPromptsGet, gate.MethodCompletionComplete, gate.MethodSubscriptionsListen:
		return s
	}
	return "other"
}

// Decided implements gate.Observer.
func (m *Metrics) Decided(req *gate.CallRequest, d *gate.Decision) {
	meth := method(req.Method)
	result := "allowed"
	if !d.Allowed {
		result = "denied"
		if d.Denial != nil && d.Denial.Type != "" {
			result = string(d.Denial.Type)
		}
	}
	m.decisions.WithLabelValues(meth, result).Inc()
	m.decisionLatency.WithLabelValues(meth).Observe(d.Latency.Seconds())
	if meth == gate.MethodToolsCall {
		tool := OtherTool
		if tools := m.tools.Load(); tools != nil && (*tools)[req.Tool] {
			tool = req.Tool
		}
		allowed := "allowed"
		if !d.Allowed {
			allowed = "denied"
		}
		m.toolCalls.WithLabelValues(tool, allowed).Inc()
	}
}

// Settled implements gate.Observer.
func (m *Metrics) Settled(c gate.SettledCall) {
	if c.Charged > 0 {
		m.spend.Add(float64(c.Charged))
	}
	m.upstreamLatency.WithLabelValues(method(c.Method)).Observe(c.Upstream.Seconds())
}

// Server is what the daemon's HTTP front reports (serve.Server has these).
type Server interface {
	// Sessions is the number of MCP sessions open.
	Sessions() int
	// InFlight is the number of requests in flight.
	InFlight() int64
	// UpstreamRestarts counts sessions whose upstream died (each new
	// session starts its own).
	UpstreamRestarts() int64
}

// WatchServer registers the server's sessions, requests in flight and
// upstream restarts, read at each scrape. Call it once.
func (m *Metrics) WatchServer(s Server) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "sessions",
			Help: "MCP sessions open."}, func() float64 { return float64(s.Sessions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "calls_in_flight",
			Help: "MCP requests in flight."}, func() float64 { return float64(s.InFlight()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "upstream_restarts_total",
			Help: "Sessions whose upstream process died; new sessions start their own."}, func() float64 { return float64(s.UpstreamRestarts()) }),
	)
}

// WatchRevocations registers the revocation list's size and age, read from
// f at each scrape: its number of entries and when it was last brought up
// to date (the zero time leaves the age out). Call it once.
func (m *Metrics) WatchRevocations(f func() (entries int, updated time.Time)) {
	m.Registry.MustRegister(&revocationCollector{f: f,
		entries: prometheus.NewDesc(namespace+"_revocation_list_entries", "Entries in the revocation list.", nil, nil),
		age:     prometheus.NewDesc(namespace+"_revocation_list_age_seconds", "Seconds since the revocation list was last brought up to date.", nil, nil),
	})
}

type revocationCollector struct {
	f            func() (int, time.Time)
	entries, age *prometheus.Desc
}

func (c *revocationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.age
}

func (c *revocationCollector) Collect(ch chan<- prometheus.Metric) {
	n, updated := c.f()
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(n))
	if !updated.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, time.Since(updated).Seconds())
	}
}
