// Package metrics exposes a delegateos daemon's figures in the Prometheus
// text format, with the Prometheus Go client.
//
// Metrics implements gate.Observer: set it as Gate.Observer and every
// decision and every settled call is counted and timed. The daemon adds
// its HTTP front with WatchServer (sessions, requests in flight, upstream
// restarts, read at each scrape) and its revocation list with
// WatchRevocations (its size, and when it was last brought up to date:
// for revdist, the last poll of every peer, or the last change without
// peers).
//
// The metrics (all prefixed delegateos_):
//
//	decisions_total{method,result}            counter; result is "allowed" or the denial type
//	decision_duration_seconds{method}         histogram of the gate's decision time
//	upstream_duration_seconds{method}         histogram of decision to settlement (the upstream's answer)
//	spend_committed_microcents_total          counter of what settled calls were charged
//	calls_in_flight                           gauge: MCP requests in flight
//	sessions                                  gauge
//	upstream_restarts_total                   counter
//	revocation_list_entries                   gauge
//	revocation_list_age_seconds               gauge: since the list was last brought up to date
//
// plus the Go runtime and process collectors. A method outside the gate's
// known methods is counted as "other", so a client cannot grow the label
// set.
package metrics
