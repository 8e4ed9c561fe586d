package memory

import "errors"

// ErrFull is returned for a decision whose debits the store has no room
// for, even beyond its bounds (see [WithMaxKeys]). Nothing was counted.
var ErrFull = errors.New("memory: store full")
