/// What an event is to the stages that count and pair events (wire format §3), by its name.
public enum RoleKind: UInt8, Sendable, CaseIterable {
    case pageEnter = 0, pageLeave, click, appStart, appEnd, crash

    /// The key under the pipeline's `roles:`.
    public var key: String {
        switch self {
        case .pageEnter: return "page_enter"
        case .pageLeave: return "page_leave"
        case .click: return "click"
        case .appStart: return "app_start"
        case .appEnd: return "app_end"
        case .crash: return "crash"
        }
    }
}

/// The event names of each role: one list per pipeline (`roles:` at the top of the pipeline file), read
/// once and given to every stage (`StageContext.roles`), so `match` and `windows` can never disagree on
/// what a page view is.
public struct EventRoles: Sendable, Equatable {
    /// Names of page view events (`page_enter`): counted by page rules, and each opens a visit of its page.
    public var pageEnter = ["$AppViewScreen", "enter_view"]
    /// Names of page-leave events (`page_leave`): each closes its page's open visit, giving its dwell time.
    public var pageLeave = ["$AppPageLeave", "leave_view"]
    /// Names of click events (`click`): counted by element rules and kept in the crash trail.
    public var click = ["$AppClick"]
    /// Names of app start events (`app_start`): they close the install's open visits without a dwell time.
    public var appStart = ["$AppStart"]
    /// Names of app end events (`app_end`): they close the install's open visits at their time.
    public var appEnd = ["$AppEnd"]
    /// Names of crash events (`crash`): they close the open visits and write the install's crash trail.
    public var crash = ["$AppCrashed"]

    /// The names of wire format §3.
    public init() {}

    /// The names of `kind`.
    public subscript(kind: RoleKind) -> [String] {
        get {
            switch kind {
            case .pageEnter: return pageEnter
            case .pageLeave: return pageLeave
            case .click: return click
            case .appStart: return appStart
            case .appEnd: return appEnd
            case .crash: return crash
            }
        }
        set {
            switch kind {
            case .pageEnter: pageEnter = newValue
            case .pageLeave: pageLeave = newValue
            case .click: click = newValue
            case .appStart: appStart = newValue
            case .appEnd: appEnd = newValue
            case .crash: crash = newValue
            }
        }
    }

    /// What makes a role list impossible to honour, per role: an empty name (no event has one); a name
    /// listed under two roles, or twice (an event has one role: match would count it as one thing and
    /// windows pair it as another); no `page_enter` name (no page view could be counted and no visit
    /// opened, so `match` and `windows` would silently produce nothing). Other roles may be empty (no
    /// dwell from leaves then, only from timeouts; no clicks; no crash trails).
    public func problems() -> [(role: RoleKind, message: String)] {
        var found: [(RoleKind, String)] = []
        var owner: [String: RoleKind] = [:]
        if pageEnter.isEmpty {
            found.append((.pageEnter, "'roles.page_enter' lists no event name: no stage could count a page view or open a visit"))
        }
        for kind in RoleKind.allCases {
            for name in self[kind] {
                if name.isEmpty {
                    found.append((kind, "'roles.\(kind.key)' lists an empty event name"))
                } else if let first = owner[name] {
                    let message = first == kind
                        ? "'roles.\(kind.key)' lists '\(name)' twice"
                        : "'\(name)' is listed under 'roles.\(first.key)' and 'roles.\(kind.key)': an event has one role"
                    found.append((kind, message))
                } else {
                    owner[name] = kind
                }
            }
        }
        return found
    }

    /// The roles as a lookup from an event's name bytes.
    public var table: Table { Table(self) }

    /// The role of an event from its name: one hash probe. Built once per stage.
    public struct Table: Sendable {
        @usableFromInline let names: TextSet
        @usableFromInline let kinds: [RoleKind]

        init(_ roles: EventRoles) {
            var all: [String] = []
            var kinds: [RoleKind] = []
            for kind in RoleKind.allCases {
                for name in roles[kind] {
                    all.append(name)
                    kinds.append(kind)
                }
            }
            names = TextSet(all)
            self.kinds = kinds
        }

        /// The role of event `i` of `batch` (by its name, compared as sent: role names need no escapes),
        /// or nil when its name is no role's.
        @inlinable public func role(ofEvent i: Int, in batch: borrowing EventBatch) -> RoleKind? {
            let ev = batch.events[i]
            guard ev.eventNameIsString, !ev.eventNameEscaped else { return nil }
            let hash = ev.eventNameHash
            return batch.withJSON { j in role(of: j[ev.eventName], hash: hash) }
        }

        /// The role of an event named `name` (whose `Hash64` is `hash`), or nil.
        @inlinable public func role(of name: ByteView, hash: UInt64) -> RoleKind? {
            names.index(of: name, hash: hash).map { kinds[$0] }
        }

        /// The role of an event named `name` (tools and tests), or nil.
        public func role(of name: String) -> RoleKind? {
            names.index(of: name).map { kinds[$0] }
        }
    }
}
