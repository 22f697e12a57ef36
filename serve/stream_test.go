package serve

import (
	"bytes"
	"testing"

	"go.uber.org/zap"
)

// A stream nobody reads holds a bounded number of events and bytes, keeps
// the newest (and always its final one), and a written one keeps only the
// last few for replay.
func TestStreamBounds(t *testing.T) {
	sess := &session{srv: &Server{log: zap.NewNop()}}
	st := newStream(sess, 1)
	for i := range maxUnsent + 10 {
		st.add([]byte{byte(i)}, false)
	}
	if u := st.unsent(); len(u) != maxUnsent || u[len(u)-1].data[0] != byte((maxUnsent+9)%256) {
		t.Fatalf("%d unsent events kept, the last %v", len(u), u[len(u)-1])
	}
	big := bytes.Repeat([]byte("x"), maxStreamBytes/4)
	for range 6 {
		st.add(big, false)
	}
	st.add([]byte("final"), true)
	if st.size > maxStreamBytes || string(st.events[len(st.events)-1].data) != "final" || !st.final {
		t.Fatalf("size %d over %d, or the final event dropped", st.size, maxStreamBytes)
	}
	sum := 0
	for _, ev := range st.events {
		sum += len(ev.data)
	}
	if sum != st.size {
		t.Fatalf("size says %d, the events hold %d", st.size, sum)
	}
	// Written: only keepWritten stay for replay.
	st.sent = st.base + int64(len(st.events))
	st.trim()
	if len(st.events) > keepWritten {
		t.Fatalf("%d written events kept", len(st.events))
	}
}
