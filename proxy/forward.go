package proxy

import (
	"strconv"
)

// forward queues a client request or notification for the upstream, with
// its id replaced by up (when up is not 0), params._delegateos cut out and,
// when p is traced, its upstream span's traceparent in params._meta.
func (s *session) forward(frame []byte, h header, cp *callParams, up int64, p *pending) error {
	var edits [3]edit
	return s.toServer.queueEdited(frame, s.forwardEdits(h, cp, up, p, &edits))
}

// forwardEdits are forward's edits, made in buf. An insertion comes
// before the cut that may start where it is made (edits are applied in
// order of where they start, ties as given).
func (s *session) forwardEdits(h header, cp *callParams, up int64, p *pending, buf *[3]edit) []edit {
	n := 0
	if e, ok := traceEdit(p, h, cp); ok {
		buf[n] = e
		n++
	}
	if up != 0 {
		buf[n] = edit{from: h.idAt, to: h.idAt + len(h.id), with: strconv.AppendInt(s.upText[:0], up, 10)}
		n++
	}
	if cp.strip {
		buf[n] = edit{from: h.paramsAt + cp.stripFrom, to: h.paramsAt + cp.stripTo}
		n++
	}
	return buf[:n]
}

// forwardBytes is the frame as forward would queue it.
func (s *session) forwardBytes(frame []byte, h header, cp *callParams, up int64, p *pending) []byte {
	var buf [3]edit
	edits := sortedEdits(s.forwardEdits(h, cp, up, p, &buf))
	out := make([]byte, 0, len(frame)+1)
	at := 0
	for _, e := range edits {
		out = append(out, frame[at:e.from]...)
		out = append(out, e.with...)
		at = e.to
	}
	return append(out, frame[at:]...)
}

// forwardedParams are params as they are forwarded (_delegateos cut out,
// see forwardEdits), for a receipt; nil for none.
func forwardedParams(params []byte, cp *callParams) []byte {
	if params == nil || !cp.strip {
		return params
	}
	out := make([]byte, 0, len(params)-(cp.stripTo-cp.stripFrom))
	return append(append(out, params[:cp.stripFrom]...), params[cp.stripTo:]...)
}
