package server

import "errors"

// ErrOptions reports an [Options] value that cannot work; the wrapped
// message names the field.
var ErrOptions = errors.New("server: invalid options")
