package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/delegateos/delegateos/receipt"
)

// An audit_log that ends in a path separator names a directory in which
// each process keeps a log of its own, so that any number of proxies on
// one policy write their evidence side by side: log-1.jsonl, log-2.jsonl,
// and so on. A process continues the first log no other process holds,
// or starts the next, so the directory holds as many logs as proxies ever
// ran at once.

// IsDir reports whether an audit_log setting names a directory of logs:
// it ends in a path separator.
func IsDir(path string) bool {
	return strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator))
}

const (
	dirLogPrefix = "log-"
	dirLogSuffix = ".jsonl"
	// maxDirLogs bounds the logs OpenDir looks through: far more than
	// processes a machine runs on one policy.
	maxDirLogs = 4096
)

// OpenDir opens a log of its own for this process in dir (created, mode
// 0700, if it does not exist): the first log-N.jsonl that no other
// process holds, continued as Open continues a log, else a new one. A log
// that cannot be continued (cut in the middle of an entry, say) is left
// as it is, for audit verify to report, and named in skipped.
func OpenDir(dir string, signer *receipt.Signer, opts Options) (l *Log, skipped []error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	for n := 1; n <= maxDirLogs; n++ {
		path := filepath.Join(dir, dirLogPrefix+strconv.Itoa(n)+dirLogSuffix)
		l, err := Open(path, signer, opts)
		if err == nil {
			return l, skipped, nil
		}
		if errors.Is(err, ErrInUse) {
			continue
		}
		if _, serr := os.Lstat(path); serr != nil {
			// Not an existing log that cannot be continued: the directory
			// cannot be written.
			return nil, skipped, err
		}
		skipped = append(skipped, err)
	}
	return nil, skipped, fmt.Errorf("%s: no log of the %d it may hold can be opened", dir, maxDirLogs)
}

// DirLogs returns the logs of a directory of logs, in the order OpenDir
// takes them.
func DirLogs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type numbered struct {
		n    int
		path string
	}
	var logs []numbered
	for _, e := range ents {
		name := e.Name()
		num, ok := strings.CutPrefix(name, dirLogPrefix)
		if !ok {
			continue
		}
		num, ok = strings.CutSuffix(num, dirLogSuffix)
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 1 || strconv.Itoa(n) != num {
			continue
		}
		logs = append(logs, numbered{n, filepath.Join(dir, name)})
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].n < logs[j].n })
	out := make([]string, len(logs))
	for i, l := range logs {
		out[i] = l.path
	}
	return out, nil
}

// Path returns the file the log is written to.
func (l *Log) Path() string { return l.path }
