@testable import MaidianRules

/// The error loading `yaml` (as `r.yaml`) reports, or "no error".
func rulesError(_ yaml: String) -> String {
    do {
        _ = try RulesFile.parse(yaml, file: "r.yaml")
        return "no error"
    } catch {
        return "\(error)"
    }
}
