// Package storerecover rebuilds what a fleet's shared Redis spend store
// lost from the fleet's signed audit logs: the spend of every delegation
// (each allowed call charged what its execution receipt says, or, without
// one, what it reserved), the calls counted at every level of a
// delegation path, and the admissions at the policy's rate limits. Every
// log is verified first; one that does not verify stops the rebuild.
// `delegateos store recover` writes the result to the store
// (budget.RecoverStore, ratelimit.RebuildRedis).
package storerecover
