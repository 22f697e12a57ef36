//go:build !unix

package budget

import "errors"

// countsEpoch needs mmap: without it a running proxy reads the counts
// the machine's other proxies wrote only when it writes its own.
type countsEpoch struct{ path string }

func openEpoch(string) (*countsEpoch, error) { return nil, errors.ErrUnsupported }
func (e *countsEpoch) load() (uint64, error) { return 0, nil }
func (e *countsEpoch) bump() (uint64, error) { return 0, nil }
func (e *countsEpoch) replaced() bool        { return false }
func (e *countsEpoch) cut() bool             { return false }
func (e *countsEpoch) close()                {}
