// Package ratelimit caps how often calls are admitted: a Limit of N per
// DURATION admits at most N calls in any window of length DURATION,
// wherever the window starts, for each key it is applied to, and a call
// that needs several keys is admitted at all of them or at none.
//
// # The window
//
// Each key keeps a log of its last N admission times. A call at time t is
// admitted when the key has fewer than N admissions, or when the N-th most
// recent one is at least DURATION before t; otherwise it must wait until
// that admission is DURATION old, which is what LimitedError.RetryAfter
// says. Any N+1 consecutive admissions at a key therefore span at least
// DURATION, so no window of that length holds more than N of them.
//
// Cheaper schemes break that promise. A fixed window (a counter reset every
// DURATION) admits N at the end of one window and N more at the start of
// the next: 2N within moments. A token bucket or GCRA with a burst of N
// refills while the burst is spent, and admits up to 2N-1 calls in a
// window of DURATION. The log costs 8 bytes an admission, at most N per
// key, and keys whose last admission is older than their window are
// dropped as new keys come.
//
// # Reservations
//
// Reserve checks every key, then takes a slot at every key, under one lock,
// so that calls made in parallel can never together pass a limit at any
// key. It returns an Admission; Release gives its slots back, for a call
// that was admitted but then refused for another reason before it was
// forwarded. Admission times are strictly increasing within a Limiter,
// which is how Release finds its own.
//
// # Memory and files
//
// New keeps the logs in memory: they restart empty with the process.
// OpenFile also keeps them in a file, so that a restarted process knows
// what was admitted in each window and a client cannot reset its limits by
// starting the proxy again. The file holds one JSON object per line:
//
//	{"at":[1712345678901234567],"keys":[["policy","ISSUER/9:del_a1b2c"],["tools:write_*","ISSUER/9:del_a1b2c"]]}
//	{"op":"release","at":[1712345678901234567],"keys":[["policy","ISSUER/9:del_a1b2c"]]}
//
// An admission line records each of its times (Unix nanoseconds) at each
// key (a limit's name and a level); a release line takes its one time back
// from its keys. Reserve appends the admission's line before it returns,
// without waiting for the disk to sync: a process that is killed loses
// nothing, and a machine that loses power may forget the last admissions
// it had not yet written out. A line that cannot be written refuses the
// call. Opening the file reads it, keeps what the limits still count (the
// last N admissions within DURATION of each key whose limit still exists),
// treats a time in the future as now, and rewrites it compactly; so does a
// rewrite every few thousand lines, and Close. A last line without its
// newline was torn by a crash during its write, and its Reserve never
// returned: it is ignored. Any other line that does not parse is an error
// naming the line, and the file is left for a person to look at.
//
// A Limiter with a file holds an exclusive lock (the file's path +
// ".lock") until Close: a second OpenFile of the same file, from any
// process, fails with an error matching ErrInUse.
//
// A Limiter is safe for concurrent use.
//
// # SQLite
//
// OpenSQLite keeps the logs in the SQLite database of a spend store
// (budget.SQLite), shared by every process on the machine that opens it:
// the proxies of one policy admit N calls in a window between them. Each
// Reserve and Release is one write transaction; each admission is a row
// (key, time, time it leaves its window), the key naming the limit's
// name, its rate and the level, so that two policies giving one name
// different rates count apart. Times are the wall clock in nanoseconds,
// strictly increasing at each key. Admissions are not synced, as the
// file's lines are not. Import moves the windows of a rate-limit file of
// an earlier version into the database.
//
// # Redis
//
// OpenRedis keeps the logs in a Redis server (Redis 7 or Valkey), shared
// by every process that opens the same URL: a fleet of proxies then admits
// N calls in a window between them, not N each. Reserve is one Lua script
// the server runs atomically: it checks every key, then takes a slot at
// every key, so two processes can never both take the last slot of a key;
// Release is another. The times are the server's clock (TIME), in
// microseconds, so that processes whose clocks disagree count the same
// windows (Reserve's now is not used), and strictly increasing at each
// key, even if that clock steps back, so that Release finds its own time
// by value. A key's log is the list
//
//	delegateos:rate:{ISSUER}:LEN:LIMIT:N/WINDOW:LEVEL
//
// of its last N times, newest first, where LEN is the length of the limit
// name LIMIT in bytes, N/WINDOW its rate (the window in microseconds) and
// ISSUER the Redis Cluster hash tag of LEVEL, as for a spend store; it
// expires when its newest time leaves its window. Proxies that give one
// name different rates (during a policy's roll-out, say) count each rate
// apart, so that a lenient rate never cuts a strict one's log short.
// What Redis acknowledged survives its restart as its append-only file
// allows (appendfsync always keeps everything). When Redis does not
// answer in time, Reserve fails with an error matching
// redisconn.ErrUnavailable and the call is refused; a Reserve whose reply
// was lost may have taken its slots all the same, which then stay taken
// until they leave their windows (the limits only get stricter). The
// store's client never retries, so that script runs at most once.
package ratelimit
