import MaidianGeo

/// When to reload a file a stage keeps loaded while it runs (the `match` stage's rules file, the
/// `location` stage's database). Between batches, at most every `every`, the file's stamp (device, inode,
/// size, times) is compared with the loaded version's: a changed file is due for loading. A version that
/// failed to load is not due again until the file changes once more; a file that is gone keeps the loaded
/// version and is reported once until it is back. The stage loads (at once or on a background thread) and
/// says how it went (``loaded(_:)``, ``failed(_:)``), and logs.
struct FileWatch {
    /// What ``check()`` found.
    enum Finding: Equatable {
        /// Nothing to do: not yet time, or no new version.
        case unchanged
        /// The file is gone (reported once until it is back).
        case gone
        /// A new version to load, with its stamp.
        case changed(GeoFileStamp)
    }

    let path: String
    let every: Duration
    private let clock = ContinuousClock()
    private var nextCheck: ContinuousClock.Instant
    private var loadedStamp: GeoFileStamp?
    private var failedStamp: GeoFileStamp?
    private var goneReported = false

    /// Watches `path`, whose version `loaded` is loaded now; the first check is `every` from now.
    init(path: String, every: Duration, loaded: GeoFileStamp?) {
        self.path = path
        self.every = every
        self.loadedStamp = loaded
        nextCheck = clock.now.advanced(by: every)
    }

    /// Between batches: whether the file changed, when it is time to look (`every` zero: every call) or
    /// `anyway`.
    mutating func check(anyway: Bool = false) -> Finding {
        guard anyway || every == .zero || clock.now >= nextCheck else { return .unchanged }
        nextCheck = clock.now.advanced(by: every)
        guard let stamp = GeoFileStamp(path: path) else {
            if goneReported { return .unchanged }
            goneReported = true
            return .gone
        }
        goneReported = false
        if stamp == loadedStamp || stamp == failedStamp { return .unchanged }
        return .changed(stamp)
    }

    /// The version with `stamp` is loaded now.
    mutating func loaded(_ stamp: GeoFileStamp) {
        loadedStamp = stamp
        failedStamp = nil
    }

    /// The version with `stamp` does not load: not tried again until the file changes.
    mutating func failed(_ stamp: GeoFileStamp) {
        failedStamp = stamp
    }
}
