// Package upstreamuser runs an MCP server (the upstream) as another user
// than the gate's, so that it cannot read what the gate's user can (the
// session token, the gate's memory and environment, its key) nor change
// what the gate decides by (the revocation list, the spend store, the
// workspace, the audit log).
//
// Resolve reads the user (USER[:GROUP]), CheckCanSwitch makes sure this
// process may start a process as that user, and User.Prepare is the hook
// that starts the upstream's command as it (proxy.Config.PrepareUpstream).
// User.MayAccess and MayModify read the mode bits the way the kernel
// would for that user, and CheckFiles and CheckRedis refuse a gate whose
// state the upstream could change. Only Linux builds switch users; on
// other systems Resolve refuses.
package upstreamuser
