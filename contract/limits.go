package contract

import "github.com/delegateos/delegateos/dct"

// Decoding limits. A contract over any of them is malformed; they bound
// the work an unauthenticated input can cause before its signature has
// been checked.
const (
	// MaxContractSize bounds a contract file.
	MaxContractSize = 1 << 20
	// MaxTitleLen bounds task.title in bytes.
	MaxTitleLen = 1024
	// MaxRequiredCapabilities bounds constraints.requiredCapabilities.
	MaxRequiredCapabilities = dct.MaxCapabilities
	// MaxCapabilityLen bounds one "namespace:action" requirement: a
	// namespace and an action of at most dct.MaxStringLen bytes each.
	MaxCapabilityLen = 2*dct.MaxStringLen + 1
	// maxTimestampLen bounds createdAt and deadline before they are parsed.
	maxTimestampLen = 64
)

// Decomposition plan limits.
const (
	// MaxPlanSize bounds a plan file, signed or as written by people.
	MaxPlanSize = 1 << 20
	// MaxSubTasks bounds the sub-tasks of a plan and the dependencies of one.
	MaxSubTasks = 64
	// MaxSubTaskIDLen bounds a sub-task ID.
	MaxSubTaskIDLen = 64
	// MaxDescriptionLen bounds a sub-task's description in bytes.
	MaxDescriptionLen = 16 << 10
)
