// Package budget records what each delegation spends and refuses calls
// that would spend more than its budget (DelegateOS §13.4), across a
// delegation tree, durably and under concurrency.
//
// # Levels and reservations
//
// A call spends from every delegation on its token's chain. The caller
// passes one Level per delegation, root first, each with its key and its
// effective budget (the token's maxBudgetMicrocents as attenuated down to
// that block). Before forwarding a call it reserves the call's cost:
//
//	r, err := store.Reserve(levels, cost) // err matches ErrExceeded: deny
//	... forward the call ...
//	store.Commit(r, actual)               // or store.Release(r) if it never ran
//
// Reserve is atomic across the levels: either every level has room and the
// cost is held at every level, or nothing changes and an *ExceededError
// names the first level (root first) that has no room. Spent, what Reserve
// compares with a limit, is committed spend plus the cost held by open
// reservations, so concurrent reservations can never together pass a limit.
// A level whose spend has reached its limit refuses even a call that costs
// nothing, as verification does (§10.1 step 6: spent ≥ budget), so the
// store is the one place that decides. A key given twice counts once.
//
// Commit replaces the held cost by the actual cost; an actual above the
// reservation is charged in full even past a limit (the money is spent),
// and the next Reserve refuses. Release drops the hold. A reservation ends
// once: committing or releasing it again, or at a store that did not make
// it, is an error and changes nothing.
//
// Costs and limits are microcents and must not be negative.
//
// # Memory and File
//
// Memory keeps spend in memory. File keeps it in a log file, so that a
// restart does not reset spend and a crash never under-counts it.
//
// The log holds one JSON object per line, each adding a delta to the
// spend of a set of keys:
//
//	{"op":"total","delta":120000,"keys":["ISSUER/del_root"],"limits":[1000000],"calls":12,"at":1767225600000}
//	{"op":"reserve","id":1,"delta":2500,"keys":["ISSUER/del_root","ISSUER/del_root/del_a"],"limits":[1000000,50000],"at":1767225601000}
//	{"op":"commit","id":1,"delta":-500,"keys":["ISSUER/del_root","ISSUER/del_root/del_a"]}
//	{"op":"reserve","id":2,"delta":0,"keys":["ISSUER/del_root"],"limits":[1000000],"at":1767225602000}
//	{"op":"commit","id":4,"delta":0,"keys":["ISSUER/del_root"]}
//	{"op":"release","id":3,"delta":-2500,"keys":["ISSUER/del_root"]}
//
// Each reservation is a call, and its line records the call: each level's
// limit ("limits", parallel to "keys") and the time ("at", Unix
// milliseconds). Reserve appends its line before it returns; one with a
// cost is synced, so a call that was forwarded is on disk even if the
// process then dies before Commit: the held cost counts as spent (fail
// closed). One of no cost is not synced (a free call never waits for the
// disk; a crash may lose its record, never spend). Commit appends actual −
// reserved, synced only when it is not zero (the reserve line already
// counts the reserved cost); Release appends −reserved, synced. Neither
// writes anything for a reservation of no cost ended at no cost. Opening the store sums the deltas. A last
// line without its newline was torn by a crash during its write, and its
// Reserve never returned: it is ignored. Any other line that does not
// parse is an error naming the line, and the file is left for a person to
// look at. Lines written before calls were recorded have no limits and no
// at, and still read.
//
// When the store is opened, and after every few thousand appended lines
// (more when there are more keys), the log is rewritten: one total per key
// of what it has committed, with its count of calls ("calls"), the time of
// the last and the limit that call gave, and then one reserve, without a
// call's record, per open reservation with a cost. The rewrite goes to a
// temporary file, synced, renamed over the log, and the directory synced.
//
// ReadUsage reads a log without its lock, while a File may be writing it,
// into each key's committed spend, held cost, calls, last call and limit.
//
// If a write fails (a full disk, an I/O error) the reservation is refused
// with an error naming the file; a failed Commit or Release still takes
// effect in memory and says so. Nothing is appended after a failed write:
// the next write rewrites the whole log from memory, and until that works
// every reservation that costs anything is refused (free calls are
// allowed, and recorded in memory until the rewrite).
//
// A File holds an exclusive lock (flock on the store's path + ".lock")
// from OpenFile to Close, so two processes never each believe they have
// the whole remaining budget: the second OpenFile fails with an error
// matching ErrInUse. Writes are serialized under the store's mutex, so
// every reservation that costs something waits for one fsync, and
// concurrent ones wait for each other's.
//
// # SQLite
//
// SQLite keeps spend in a SQLite database (WAL mode, through
// modernc.org/sqlite) that every process on the machine opening the same
// file shares: the proxies of one person's clients (each starting its own
// stdio proxy) spend from one budget. It is what Open gives a path that
// does not exist, is empty or holds a database; a spend log of the File
// format still opens as a File (one process), and Migrate with the same
// path for from and to turns it into a database in place.
//
// The table spend holds each key's committed ("committed") and held
// ("held") cost and its record of calls; reservation the open
// reservations, each with the store that made it. A writer goroutine per
// store runs the process's waiting Reserve, Commit and Release calls in
// one BEGIN IMMEDIATE transaction (group commit); SQLite runs one write
// transaction at a time across every process, so reservations from any
// number of processes never together pass a limit. A transaction that
// holds a cost, or commits or releases one other than the reserved cost,
// is synced (synchronous=FULL) before the call returns; a free
// reservation is not, and a commit at the reserved cost (which changes no
// spend) is handed to the writer without waiting, as the File does not
// sync them.
//
// Each store holds an exclusive lock on a file of its own in PATH.owners
// while it is open. The next store opened settles, at their reserved cost,
// the reservations of every owner whose lock is free (its process was
// killed), and a store that closes settles its own: a held cost counts as
// spent until then, as a File counts it. A reservation settled so and
// then committed by its own store is charged once. A write that waits
// past the busy timeout for another process's transaction, a full disk or
// a damaged file fails with an error that does not match ErrExceeded,
// which the proxy turns into the denial store_unavailable; a damaged file
// or a directory the process cannot write is refused by OpenSQLite.
//
// # Redis
//
// Redis keeps spend in a Redis server (Redis 7 or Valkey) named by a
// redis:// or rediss:// URL, shared by every proxy that opens the same URL:
// the budgets of a delegation tree hold across a fleet. Each key's spend is
// a hash, delegateos:spend:{TAG}:KEY, with its committed ("c") and held
// ("h") cost, calls ("n"), the time of the last call ("t") and the limit
// it gave ("l"); TAG is the key's issuer (the part before the first "/"),
// the Redis Cluster hash tag that keeps a tree on one shard. The open
// reservations of a tree are one hash, delegateos:open:{TAG}, from
// reservation ID to held cost: every key's held cost is its open
// reservations', so a key holding cost while the hash is gone means the
// hash was lost, and Reserve refuses the tree (ErrReset).
//
// Reserve, Commit and Release each run one Lua script on the server
// (EVALSHA), which Redis runs atomically: Reserve checks every level and
// holds the cost at each, or changes nothing, so reservations from any
// number of proxies never together pass a limit. The scripts compute on
// the decimal strings Redis keeps, exactly up to the largest int64.
// Reservation IDs are unique across the fleet, so a command retried after
// its reply was lost changes nothing the second time; a Reserve that got
// no reply is cancelled in the background, and a Reserve that reaches the
// server after its cancelling holds nothing. A commit at the reserved cost
// rides in the next Reserve of the same tree, in its round trip and its
// write, or is sent in the background, batched with others: the cost is
// already held, so spend reads the same until it arrives.
//
// A proxy that stops with reservations open leaves their cost held, which
// counts as spent, as a File does. What Redis acknowledged survives a
// restart of the server only if it runs with appendonly yes and appendfsync
// always. When Redis does not answer within the URL's timeouts (1 s by
// default) Reserve fails with an error matching redisconn.ErrUnavailable,
// which the proxy turns into the denial store_unavailable; the client
// reconnects by itself.
//
// Migrate moves a store between a file and Redis, keeping every key's
// spend and calls.
//
// A missing store is created empty: a store that is deleted, or a path
// that is mistyped, starts spend again from zero. Keep the store with the
// proxy's other state and give it a fixed path.
package budget
