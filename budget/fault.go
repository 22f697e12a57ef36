package budget

import (
	"fmt"
	"runtime/debug"
)

// The state directory's counts epoch and each proxy's live record are
// files mapped into the proxy's memory (MAP_SHARED). A file cut while
// mapped (the user's `: > FILE`, a restore tool rewriting it in place)
// leaves its pages past the file's end, and a load or store there is a
// SIGBUS, which would kill the proxy at a call (red team 7, RT7-1 and
// RT7-4). So every load and store through a mapping runs with the
// goroutine's panic-on-fault set (debug.SetPanicOnFault, a field of the
// goroutine: a few nanoseconds), and guardFault turns the fault into a
// cutError naming the file: the proxy then maps a whole file again (see
// Redis.repairMaps) or refuses the call store_unavailable, never crashes.

// cutError is a load or store through the mapping of path that faulted:
// the file was cut (or its disk failed) while the proxy mapped it.
type cutError struct{ path string }

func (e *cutError) Error() string {
	return fmt.Sprintf("%s was cut while this proxy had it mapped (a load or store past the file's end faulted)", e.path)
}

// guardFault is deferred by a function that loads or stores through the
// mapping of path, with the goroutine's earlier panic-on-fault setting
// (what debug.SetPanicOnFault(true) returned, evaluated by the defer
// statement, after path, before the guarded loads and stores): it
// restores the setting and turns a fault there into *err = a cutError.
// Any other panic goes on.
func guardFault(path string, err *error, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		if _, fault := r.(interface{ Addr() uintptr }); !fault {
			panic(r)
		}
		*err = &cutError{path: path}
	}
}
