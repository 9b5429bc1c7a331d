/// What this build of Maidian is: `maidian --version` prints it and `maidian_build_info` carries it.
public enum MaidianBuild {
    /// The release version, raised with each release (semantic versioning: the pipeline file format and the
    /// wire format of docs/wire-format.md change only with the major version).
    public static let version = "0.17.0"
}
