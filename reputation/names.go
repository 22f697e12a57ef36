package reputation

// Versions and types written into every file this package creates (§2.2,
// §5.2). Existing files keep the versions they were written with.
const (
	AWPVersion = "0.3.0"
	RDPVersion = "1.0"

	TypeProfile  = "reputation-profile"
	TypeContract = "delegation-contract"

	// ProfileIDPrefix and ContractIDPrefix start the id of a profile
	// ("reputation:<slug>") and of a contract ("contract:<slug>").
	ProfileIDPrefix  = "reputation:"
	ContractIDPrefix = "contract:"

	// ProfilesDir and ContractsDir are the workspace's RDP directories.
	ProfilesDir  = "reputation"
	ContractsDir = "contracts"
)

// The standard dimensions (§2.3). Other names are custom dimensions.
const (
	Reliability      = "reliability"
	EpistemicHygiene = "epistemic-hygiene"
	Coordination     = "coordination"
	// DomainCompetence is the dimension of a signal about one domain
	// (§2.5); such a signal names the domain.
	DomainCompetence = "domain-competence"
)

// StandardDimensions lists the standard dimensions in the spec's order.
var StandardDimensions = []string{Reliability, EpistemicHygiene, Coordination}

// The standard evaluation criteria (§5.6).
const (
	Completeness = "completeness"
	Accuracy     = "accuracy"
	Clarity      = "clarity"
	Timeliness   = "timeliness"
)

// KnowledgeArtifact is the task output format whose evaluation also rates
// the delegate's domain competence (§5.8).
const KnowledgeArtifact = "knowledge-artifact"

// DefaultCriteria are the weights of a contract created without criteria:
// the spec's example (Appendix A.2).
func DefaultCriteria() map[string]float64 {
	return map[string]float64{Completeness: 0.3, Accuracy: 0.4, Clarity: 0.2, Timeliness: 0.1}
}
