package ruleset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoKey is returned, wrapped, by a key function whose rule does not apply
// to a request. httplimit and grpclimit export it as their ErrNoKey, so a
// key function may return either.
var ErrNoKey = errors.New("redlimit: no key for the request")

type userKey struct{}

// WithUser returns a copy of ctx that carries the authenticated user's id,
// which httplimit's and grpclimit's User key functions read.
func WithUser(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, userKey{}, id)
}

// UserFrom returns the user id that [WithUser] put in ctx, and whether there
// is a non-empty one.
func UserFrom(ctx context.Context) (string, bool) {
	id, _ := ctx.Value(userKey{}).(string)
	return id, id != ""
}

// Compose returns a key function whose key is made of the keys of all of
// keys, in order. The parts are joined by '|' with each part's '%' and '|'
// percent-escaped, so no choice of parts can forge another combination. If
// any part fails (has no key), the composition fails with its error.
func Compose[R any, F ~func(R) (string, error)](keys ...F) F {
	keys = append([]F(nil), keys...)
	return func(r R) (string, error) {
		var b strings.Builder
		for i, kf := range keys {
			k, err := kf(r)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteByte('|')
			}
			writeEscaped(&b, k)
		}
		return b.String(), nil
	}
}

// Or returns a key function that uses the first of keys that has a key for
// the request: that does not fail with an error wrapping [ErrNoKey]. Each
// key is prefixed by its function's position ("0:", "1:", ...), so one kind
// of key cannot reach the allowance of another.
// Other errors are returned at once. If none has a key, Or fails with
// ErrNoKey.
func Or[R any, F ~func(R) (string, error)](keys ...F) F {
	keys = append([]F(nil), keys...)
	return func(r R) (string, error) {
		for i, kf := range keys {
			k, err := kf(r)
			if err == nil {
				return strconv.Itoa(i) + ":" + k, nil
			}
			if !errors.Is(err, ErrNoKey) {
				return "", err
			}
		}
		return "", fmt.Errorf("%w: no alternative applies", ErrNoKey)
	}
}

// Hashed returns a key function whose key is the first 128 bits of the
// SHA-256 of key's, in hex. It is fixed in size. Neither the store nor the
// logs see the original.
func Hashed[R any, F ~func(R) (string, error)](key F) F {
	return func(r R) (string, error) {
		k, err := key(r)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256([]byte(k))
		return hex.EncodeToString(sum[:16]), nil
	}
}

// writeEscaped writes s with '%' and '|' percent-escaped.
func writeEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			b.WriteString("%25")
		case '|':
			b.WriteString("%7C")
		default:
			b.WriteByte(s[i])
		}
	}
}
