// The `maidian` executable: the CLI library with the built-in stages.
// A team's own build does the same with its stages added (see examples/custom-stage).
import MaidianCLI
import MaidianStages

await MaidianCLI.main(registry: BuiltinStages.registry)
