package redisstore

import "github.com/redlimit/redlimit"

// KeyOf returns the Redis key that holds the state of key under l. Tests
// use it to delete what a run wrote.
func (s *Store) KeyOf(key string, l redlimit.Limit) string {
	return s.key(hashTag(key), l)
}
