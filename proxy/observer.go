package proxy

// Observer is told what the Gate decides, for metrics. Its methods are
// called on the decision path, concurrently: they must be quick and must
// not block.
type Observer interface {
	// Decided is called once per decision, with the request and the
	// decision (Latency set); neither may be kept or changed.
	Decided(req *CallRequest, d *Decision)
	// Settled is called when an allowed call is charged, with what it was
	// charged in microcents (not when its reservation is released).
	Settled(charged int64)
}
