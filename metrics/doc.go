// Package metrics exposes a delegateos daemon's figures in the Prometheus
// text format, with the Prometheus Go client.
//
// Metrics implements proxy.Observer: set it as Gate.Observer and every
// decision and every settled call is counted. The daemon reports the rest
// through the hook methods:
//
//   - CallStarted when it forwards an allowed call upstream, and the
//     function it returns when the upstream has answered (or the call was
//     given up): in-flight calls and upstream latency by method;
//   - SessionOpened and SessionClosed: sessions open;
//   - UpstreamRestarted when an upstream process is started again after
//     it exited;
//   - WatchRevocations once, with a function giving the revocation list's
//     size and when it was last brought up to date (for revdist, the last
//     poll of every peer, or the last change without peers).
//
// The metrics (all prefixed delegateos_):
//
//	decisions_total{method,result}            counter; result is "allowed" or the denial type
//	decision_duration_seconds{method}         histogram of the gate's decision time
//	upstream_duration_seconds{method}         histogram of the upstream's answer time
//	spend_committed_microcents_total          counter of what settled calls were charged
//	calls_in_flight                           gauge
//	sessions                                  gauge
//	upstream_restarts_total                   counter
//	revocation_list_entries                   gauge
//	revocation_list_age_seconds               gauge: since the list was last brought up to date
//
// plus the Go runtime and process collectors. A method outside the gate's
// known methods is counted as "other", so a client cannot grow the label
// set.
package metrics
