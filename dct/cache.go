package dct

import (
	"container/list"
	"sync"
)

// cache is a bounded LRU of verified tokens keyed by the exact serialized
// token. A nil *cache caches nothing.
type cache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element
}

type cacheEntry struct {
	key string
	val *verified
}

func newCache(max int) *cache {
	// The map grows as tokens arrive; a large CacheSize must not allocate
	// up front.
	return &cache{max: max, ll: list.New(), items: make(map[string]*list.Element, min(max, 1024))}
}

func (c *cache) get(key string) *verified {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cacheEntry).val
}

func (c *cache) put(key string, v *verified) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		el.Value.(*cacheEntry).val = v
		return
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, val: v})
	if c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
}

func (c *cache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
