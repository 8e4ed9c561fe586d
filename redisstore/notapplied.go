package redisstore

// NotApplied reports whether err shows that a call did not run. err comes
// from a call of the Store that ran one script call: a decision whose
// keys share a slot. Redis refused it (BUSY, LOADING, CLUSTERDOWN, MOVED,
// ...), or no connection could be made. Making such a call again cannot
// count it twice. A timeout, or a connection lost after the call was sent,
// leaves unknown whether it ran: false.
func (s *Store) NotApplied(err error) bool { return notApplied(err) }
