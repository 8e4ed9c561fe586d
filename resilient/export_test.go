package resilient

// DenyCacheLen returns how many entries l's deny cache holds.
func DenyCacheLen(l *Limiter) int { return l.deny.len() }

// LastSeenLen returns how many states l remembers the store's answer for.
func LastSeenLen(l *Limiter) int { return l.local.seen.len() }

// NodesOf returns the live nodes l counts.
func NodesOf(l *Limiter) int { return l.local.nodes.Nodes() }
