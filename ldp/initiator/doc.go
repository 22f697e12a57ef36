// Package initiator is the DelegateOS side of an LDP initiator (`delegateos
// ldp submit`): narrowing a token for the one task handed to a delegate,
// the text form of a frame the delegate refused (§4.3), and recording
// what the task showed of the delegate as an RDP signal.
package initiator
