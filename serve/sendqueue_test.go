package serve

import (
	"testing"

	"github.com/delegateos/delegateos/proxy"
)

// One frame over the byte bound goes when the queue is empty, not behind
// another; answers are queued beside the bounds.
func TestSendQueueBounds(t *testing.T) {
	q := newSendQueue()
	big := make([]byte, maxQueuedNotificationBytes+1)
	if !q.push(big, proxy.Message{}) {
		t.Fatal("a frame over the byte bound was refused on an empty queue")
	}
	if q.push(big, proxy.Message{}) {
		t.Fatal("a second frame over the byte bound was queued")
	}
	if !q.pushAnswer(big, proxy.Message{}) {
		t.Fatal("an answer was refused")
	}
	for i := 0; i < 2; i++ {
		if _, ok := q.pop(); !ok {
			t.Fatal("pop")
		}
	}
	if q.bytes != 0 || q.answers != 0 {
		t.Fatalf("bytes %d, answers %d after the queue emptied", q.bytes, q.answers)
	}
	q.close()
}
