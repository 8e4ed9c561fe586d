package redisstore

import "github.com/redlimit/redlimit"

// SingleScript returns the source of the script that allows or peeks at one
// limit of algorithm a.
func SingleScript(a redlimit.Algorithm) string { return singleSources[a] }
