//go:build !unix

package budget

import "errors"

// countsEpoch needs mmap: without it a running proxy reads the counts
// the machine's other proxies wrote only when it writes its own.
type countsEpoch struct{}

func openEpoch(string) (*countsEpoch, error) { return nil, errors.ErrUnsupported }
func (e *countsEpoch) load() uint64          { return 0 }
func (e *countsEpoch) bump() uint64          { return 0 }
func (e *countsEpoch) close()                {}
