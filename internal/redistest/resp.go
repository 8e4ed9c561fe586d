package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ReplyError is a Redis error reply (for example "MOVED 3999 127.0.0.1:7002"
// or "ERR unknown command") returned by Server.Do.
type ReplyError string

// Error returns the error message sent by the server.
func (e ReplyError) Error() string { return string(e) }

const (
	doDialTimeout = time.Second
	doDeadline    = 5 * time.Second
)

// do runs one command against addr on a fresh connection. If password is
// not empty it authenticates first. The reply is rendered as text; an error
// reply becomes a ReplyError.
func do(addr, password string, dialTimeout, deadline time.Duration, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("redistest: Do needs at least one argument")
	}
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(deadline)); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	if password != "" {
		if _, err := roundTrip(conn, r, "AUTH", password); err != nil {
			return "", fmt.Errorf("redistest: AUTH: %w", err)
		}
	}
	return roundTrip(conn, r, args...)
}

func roundTrip(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	if _, err := w.Write(encodeCommand(args)); err != nil {
		return "", err
	}
	var lines []string
	if err := readReply(r, &lines, true); err != nil {
		return "", err
	}
	return strings.Join(lines, "\n"), nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args []string) []byte {
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("redistest: malformed RESP line %q", line)
	}
	return line[:len(line)-2], nil
}

// readReply reads one reply and appends its text rendering to lines
// (nested arrays are flattened, one element per line). A top-level error
// reply is returned as a ReplyError; nested error replies are rendered as
// their message, nil replies as empty lines.
func readReply(r *bufio.Reader, lines *[]string, top bool) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if line == "" {
		return errors.New("redistest: empty RESP line")
	}
	kind, rest := line[0], line[1:]
	switch kind {
	case '+', ':', ',', '(':
		*lines = append(*lines, rest)
	case '-':
		if top {
			return ReplyError(rest)
		}
		*lines = append(*lines, rest)
	case '_':
		*lines = append(*lines, "")
	case '#':
		if rest == "t" {
			*lines = append(*lines, "1")
		} else {
			*lines = append(*lines, "0")
		}
	case '$', '=', '!':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return fmt.Errorf("redistest: bad bulk length %q", line)
		}
		if n < 0 { // nil bulk string
			*lines = append(*lines, "")
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		s := string(buf[:n])
		switch kind {
		case '=': // verbatim string: "txt:..."
			if len(s) >= 4 && s[3] == ':' {
				s = s[4:]
			}
		case '!':
			if top {
				return ReplyError(s)
			}
		}
		*lines = append(*lines, s)
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return fmt.Errorf("redistest: bad array length %q", line)
		}
		if n < 0 { // nil array
			return nil
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		dst := lines
		if kind == '|' { // attribute: discarded, the real reply follows
			dst = new([]string)
		}
		for i := 0; i < n; i++ {
			if err := readReply(r, dst, false); err != nil {
				return err
			}
		}
		if kind == '|' {
			return readReply(r, lines, top)
		}
	default:
		return fmt.Errorf("redistest: unknown RESP type in %q", line)
	}
	return nil
}
