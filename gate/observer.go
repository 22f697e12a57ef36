package gate

import "time"

// Observer is told what the Gate decides, for metrics. Its methods are
// called on the decision path, concurrently: they must be quick and must
// not block.
type Observer interface {
	// Decided is called once per decision, with the request and the
	// decision (Latency set); neither may be kept or changed.
	Decided(req *CallRequest, d *Decision)
	// Settled is called once per allowed call that reserved budget, when
	// the relay settles it (Gate.Settle) and the spend store has recorded
	// it.
	Settled(c SettledCall)
}

// SettledCall is an allowed call as it was settled.
type SettledCall struct {
	// Method is the request's method ("" is tools/call).
	Method string
	// Charged is what the call was charged in microcents; Released says
	// its reservation was dropped instead (the upstream refused it).
	Charged  int64
	Released bool
	// Upstream is the time from the decision to the settlement: the
	// upstream's answer, or the call's end otherwise.
	Upstream time.Duration
}

// observed is what a Decision keeps for its Settled call.
type observed struct {
	method string
	at     time.Time // when it was decided
}

// settled tells the Observer of a settled call whose spend was recorded.
func (g *Gate) settled(d *Decision, charged int64, released bool, err error) {
	if g.Observer == nil || err != nil {
		return
	}
	c := SettledCall{Method: d.observed.method, Charged: charged, Released: released}
	if !d.observed.at.IsZero() {
		c.Upstream = time.Since(d.observed.at)
	}
	g.Observer.Settled(c)
}

// Observers is an Observer that tells each of its Observers, in order, of
// every decision and settlement: the metrics, say, and a recorder of
// tokens.
type Observers []Observer

var _ Observer = Observers(nil)

// Decided implements Observer.
func (o Observers) Decided(req *CallRequest, d *Decision) {
	for _, x := range o {
		x.Decided(req, d)
	}
}

// Settled implements Observer.
func (o Observers) Settled(c SettledCall) {
	for _, x := range o {
		x.Settled(c)
	}
}
