// The team's `maidian`: every built-in stage plus the team's own, and Maidian's whole command line
// (run, check, bench, broker, gen, produce, peek, stages).
import MaidianCLI
import MaidianStages
import TeamStages

var registry = BuiltinStages.registry
registry.register(TagInternalUsersStage.self)
await MaidianCLI.main(registry: registry)
