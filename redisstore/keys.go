package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit"
)

// maxTagLen is the longest identifier kept as it is in a key. A longer one
// is replaced by "#" and its hex SHA-256: 65 bytes, however long.
const maxTagLen = 128

// algCodes name the algorithms in keys; the index is the script's algorithm number.
var algCodes = [...]string{redlimit.FixedWindow: "fw", redlimit.SlidingLog: "sl", redlimit.SlidingWindow: "sw", redlimit.TokenBucket: "tb"}

// hashTag turns a caller's identifier into the text between the key's braces.
// It is injective, and the result holds no brace. So whatever the
// identifier holds (braces, colons, newlines), it cannot choose another
// slot or collide with another identifier. '%', '{', '}' and '#' are
// percent-escaped. Identifiers longer than maxTagLen become '#' + hex
// SHA-256.
func hashTag(id string) string {
	if len(id) > maxTagLen {
		sum := sha256.Sum256([]byte(id))
		return "#" + hex.EncodeToString(sum[:])
	}
	if !strings.ContainsAny(id, "%{}#") {
		return id
	}
	var b strings.Builder
	b.Grow(len(id) + 8)
	for i := 0; i < len(id); i++ {
		switch c := id[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		case '#':
			b.WriteString("%23")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// key returns the Redis key of limit l for tag: prefix{tag}:alg:period, and
// :unit:zone for a calendar limit.
// Scripts derive per-window keys by appending ":<window>".
func (s *Store) key(tag string, l redlimit.Limit) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(tag) + 24)
	b.WriteString(s.prefix)
	b.WriteByte('{')
	b.WriteString(tag)
	b.WriteString("}:")
	b.WriteString(algCodes[l.Algorithm])
	b.WriteByte(':')
	var period [20]byte
	b.Write(strconv.AppendInt(period[:0], l.Period.Microseconds(), 10)) // no string of its own, so the key allocates once
	if c := l.Calendar.Canonical(); !c.IsZero() {
		// The calendar names the state: its window is a field of the hash.
		b.WriteByte(':')
		b.WriteString(c.Unit.String())
		b.WriteByte(':')
		b.WriteString(c.Zone)
	}
	return b.String()
}
